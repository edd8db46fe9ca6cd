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
    public static func seal(_ secret: [UInt8], tcti: String) throws(TPMError) -> [UInt8] {
        try withTPM(tcti) { tpm throws(TPMError) in
            var blob = [UInt8](repeating: 0, count: Int(LA_TPM_MAX_BLOB))
            var size = blob.count
            let rc = la_tpm_seal(tpm, secret, secret.count, &blob, &size)
            guard rc == 0 else { throw TPMError("sealing", rc) }
            return Array(blob[..<size])
        }
    }

    /// The secret in a blob `seal` made on this TPM.
    public static func unseal(_ blob: [UInt8], tcti: String) throws(TPMError) -> [UInt8] {
        try withTPM(tcti) { tpm throws(TPMError) in
            var secret = [UInt8](repeating: 0, count: 128)
            var size = secret.count
            let rc = la_tpm_unseal(tpm, blob, blob.count, &secret, &size)
            guard rc == 0 else { throw TPMError("unsealing", rc) }
            return Array(secret[..<size])
        }
    }

    /// `count` (at most 32) random bytes: one command on a fresh connection, the floor the
    /// benchmark sets beside sealing and unsealing.
    public static func randomBytes(_ count: Int, tcti: String) throws(TPMError) -> [UInt8] {
        try withTPM(tcti) { tpm throws(TPMError) in
            var bytes = [UInt8](repeating: 0, count: count)
            let rc = la_tpm_random(tpm, &bytes, count)
            guard rc == 0 else { throw TPMError("random bytes", rc) }
            return bytes
        }
    }

    private static func withTPM<T>(_ tcti: String, _ body: (OpaquePointer) throws(TPMError) -> T) throws(TPMError) -> T
    {
        var tpm: OpaquePointer?
        let rc = la_tpm_open(tcti, &tpm)
        guard rc == 0, let tpm else { throw TPMError("opening \(tcti)", rc) }
        defer { la_tpm_close(tpm) }
        return try body(tpm)
    }
}

/// A TPM command that failed, in the TSS's words.
public struct TPMError: Error, CustomStringConvertible, Equatable {
    let operation: String
    let code: UInt32
    init(_ operation: String, _ code: UInt32) {
        self.operation = operation
        self.code = code
    }
    public var description: String {
        "\(operation): \(la_tpm_error(code).map { String(cString: $0) } ?? "TPM error \(code)")"
    }
}
