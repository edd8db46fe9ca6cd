import CTPM

/// The machine's TPM 2.0 (or a simulator), through tpm2-tss: the commands the hardware root needs
/// (`MasterKeyRoot`). Each call opens the TPM, runs its commands and closes it; the daemon calls
/// them at start only (a TPM takes milliseconds to seconds a command, and is shared with the
/// rest of the machine).
public enum TPMDevice {
    /// The TCTI that names the machine's TPM through the kernel's resource manager.
    static let machineDevice = "/dev/tpmrm0"
    static let machineTCTI = "device:" + machineDevice

    /// Seals `secret` (at most 128 bytes) to this TPM: the blob opens on no other (fixedTPM,
    /// fixedParent, under the owner hierarchy's storage primary) and counts toward no dictionary
    /// lockout (noDA: the secret is random, not guessable).
    public static func seal(_ secret: [UInt8], tcti: String) throws(DaemonError) -> [UInt8] {
        try withTPM(tcti) { tpm throws(DaemonError) in
            var blob = [UInt8](repeating: 0, count: Int(LA_TPM_MAX_BLOB))
            var size = blob.count
            let rc = la_tpm_seal(tpm, secret, secret.count, &blob, &size)
            guard rc == 0 else { throw DaemonError.tpm("sealing", rc) }
            return Array(blob[..<size])
        }
    }

    /// The secret in a blob `seal` made on this TPM.
    public static func unseal(_ blob: [UInt8], tcti: String) throws(DaemonError) -> [UInt8] {
        try withTPM(tcti) { tpm throws(DaemonError) in
            var secret = [UInt8](repeating: 0, count: 128)
            var size = secret.count
            let rc = la_tpm_unseal(tpm, blob, blob.count, &secret, &size)
            guard rc == 0 else { throw DaemonError.tpm("unsealing", rc) }
            return Array(secret[..<size])
        }
    }

    /// `count` (at most 32) random bytes: one command on a fresh connection, the floor the
    /// benchmark sets beside sealing and unsealing.
    public static func randomBytes(_ count: Int, tcti: String) throws(DaemonError) -> [UInt8] {
        try withTPM(tcti) { tpm throws(DaemonError) in
            var bytes = [UInt8](repeating: 0, count: count)
            let rc = la_tpm_random(tpm, &bytes, count)
            guard rc == 0 else { throw DaemonError.tpm("random bytes", rc) }
            return bytes
        }
    }

    /// The rollback counter's place and value.
    public struct Counter: Equatable, Sendable, Codable {
        public let index: UInt32
        public let value: UInt64
    }

    /// Where the daemon's counters go: the owner's NV range (TCG: 0x01800000–0x01BFFFFF), away from
    /// the Linux range systemd and others take (0x01D10200–0x01D105FF); one free index in 4096 is
    /// picked at random.
    static let counterIndices: Range<UInt32> = 0x01A4_C000..<0x01A4_D000

    /// Defines a new rollback counter that only `auth` reads or moves (an ordinary, not orderly,
    /// counter: each increment is durable) and returns it after its first increment. Its first
    /// value is the highest any counter of this TPM ever had: a counter deleted and defined again
    /// never goes back.
    public static func defineCounter(auth: [UInt8], tcti: String) throws(DaemonError) -> Counter {
        try withTPM(tcti) { tpm throws(DaemonError) in
            var lastError = DaemonError.tpm("defining a counter", 0)
            for _ in 0..<16 {
                let index = UInt32.random(in: counterIndices)
                var value: UInt64 = 0
                let rc = la_tpm_counter_define(tpm, index, auth, auth.count, &value)
                if rc == 0 { return Counter(index: index, value: value) }
                lastError = DaemonError.tpm("defining a counter", rc)
                guard la_tpm_rc_is_defined(rc) != 0 else { break }
            }
            throw lastError
        }
    }

    /// Moves the counter by one, durably, and returns its new value.
    public static func incrementCounter(index: UInt32, auth: [UInt8], tcti: String) throws(DaemonError) -> UInt64 {
        try counter(index: index, auth: auth, tcti: tcti, increment: true)
    }

    /// The counter's value; `DaemonError.tpmObjectMissing` when the TPM has no such index (deleted).
    public static func readCounter(index: UInt32, auth: [UInt8], tcti: String) throws(DaemonError) -> UInt64 {
        try counter(index: index, auth: auth, tcti: tcti, increment: false)
    }

    private static func counter(
        index: UInt32,
        auth: [UInt8],
        tcti: String,
        increment: Bool
    ) throws(DaemonError)
        -> UInt64
    {
        try withTPM(tcti) { tpm throws(DaemonError) in
            var value: UInt64 = 0
            let rc = la_tpm_counter(tpm, index, auth, auth.count, increment ? 1 : 0, &value)
            guard rc == 0 else { throw DaemonError.tpm(increment ? "moving the counter" : "reading the counter", rc) }
            return value
        }
    }

    /// Deletes the NV index (the owner's authorization, empty on most machines, is all it takes:
    /// the reason a deleted counter can only be detected).
    public static func undefineCounter(index: UInt32, tcti: String) throws(DaemonError) {
        try withTPM(tcti) { tpm throws(DaemonError) in
            let rc = la_tpm_counter_undefine(tpm, index)
            guard rc == 0 else { throw DaemonError.tpm("deleting the counter", rc) }
        }
    }

    /// Whether a resource manager stands between us and the TPM (the kernel's `/dev/tpmrm*`,
    /// tpm2-abrmd): it keeps each client's sessions and objects apart and flushes them when the
    /// client goes.
    static func managed(_ tcti: String) -> Bool {
        let name = tcti.split(separator: ":", maxSplits: 1).first.map(String.init) ?? tcti
        return tcti.contains("/dev/tpmrm") || name.contains("tabrmd")
    }

    static func withTPM<T>(_ tcti: String, _ body: (OpaquePointer) throws(DaemonError) -> T) throws(DaemonError) -> T {
        var tpm: OpaquePointer?
        let rc = la_tpm_open(tcti, managed(tcti) ? 0 : 1, &tpm)
        guard rc == 0, let tpm else { throw DaemonError.tpm("opening \(tcti)", rc) }
        defer { la_tpm_close(tpm) }
        return try body(tpm)
    }
}

extension DaemonError {
    /// A TPM command that failed, in the TSS's words; `rc` is kept as `tpmResponse`.
    static func tpm(_ operation: String, _ rc: UInt32) -> DaemonError {
        DaemonError(
            .tpmCommandFailed,
            "\(operation): \(la_tpm_error(rc).map { String(cString: $0) } ?? "TPM error \(rc)")",
            tpmResponse: rc
        )
    }

    /// The TPM has no object at the handle (a counter that was deleted).
    public var tpmObjectMissing: Bool { tpmResponse.map { la_tpm_rc_is_missing($0) != 0 } ?? false }
    /// The TPM refused an authorization (a wrong auth value).
    var tpmAuthorizationFailed: Bool { tpmResponse.map { la_tpm_rc_is_auth_fail($0) != 0 } ?? false }
    /// TPM_RC_INTEGRITY: a blob or credential whose integrity check failed (tampered, or made for
    /// another TPM or key). A format-one code: the number in its low six bits.
    var tpmIntegrityFailed: Bool {
        guard let rc = tpmResponse else { return false }
        return rc >> 12 == 0 && rc & 0x80 != 0 && rc & 0x3F == 0x1F
    }
}
