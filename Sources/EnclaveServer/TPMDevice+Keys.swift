import CTPM
import Synchronization

/// The storage primary's saved context, kept between connections to one TPM so that a key's use
/// loads the primary instead of deriving it again (`la_tpm_context`). Used on `BlockingWork.tpm`'s
/// one thread; elsewhere, two uses at once would at worst both derive the primary.
public final class TPMPrimaryContext: Sendable {
    public init() {}

    private let saved = Mutex<[UInt8]>([])

    /// Opens the TPM `tcti` names and runs `body` with it and the context, keeping what `body`
    /// left in the context (a new one, or none).
    func withTPM<T>(
        _ tcti: String,
        _ body: (OpaquePointer, inout la_tpm_context) throws(DaemonError) -> T
    ) throws(DaemonError) -> T {
        var bytes = saved.withLock { $0 }
        let size = bytes.count
        bytes += [UInt8](repeating: 0, count: Int(LA_TPM_MAX_CONTEXT) - size)
        return try bytes.withUnsafeMutableBufferPointer { buffer throws(DaemonError) in
            var context = la_tpm_context(bytes: buffer.baseAddress, capacity: buffer.count, size: size)
            defer {
                let kept = Array(buffer[..<context.size])
                saved.withLock { $0 = kept }
            }
            return try TPMDevice.withTPM(tcti) { tpm throws(DaemonError) in try body(tpm, &context) }
        }
    }
}

extension TPMDevice {
    /// A P-256 key the TPM made and holds: its blob (the public part and the private part the
    /// TPM's seed encrypts, useful on that TPM only) and its public key as the TPM states it (X9.63).
    public struct CreatedKey: Sendable {
        public let blob: [UInt8]
        public let publicKey: [UInt8]
    }

    /// Makes a key inside the TPM for signing and/or key agreement, usable only with `auth`.
    public static func createKey(
        signing: Bool,
        agreement: Bool,
        auth: [UInt8],
        tcti: String,
        primary: TPMPrimaryContext
    ) throws(DaemonError) -> CreatedKey {
        try primary.withTPM(tcti) { tpm, context throws(DaemonError) in
            var blob = [UInt8](repeating: 0, count: Int(LA_TPM_MAX_BLOB))
            var size = blob.count
            var x = [UInt8](repeating: 0, count: 32)
            var y = [UInt8](repeating: 0, count: 32)
            let rc = la_tpm_key_create(
                tpm,
                &context,
                signing ? 1 : 0,
                agreement ? 1 : 0,
                auth,
                auth.count,
                &blob,
                &size,
                &x,
                &y
            )
            guard rc == 0 else { throw DaemonError.tpm("creating a key", rc) }
            return CreatedKey(blob: Array(blob[..<size]), publicKey: [0x04] + x + y)
        }
    }

    /// The ECDSA signature (r ‖ s, 64 bytes) of a SHA-256 digest, made inside the TPM.
    public static func sign(
        digest: [UInt8],
        blob: [UInt8],
        auth: [UInt8],
        tcti: String,
        primary: TPMPrimaryContext
    ) throws(DaemonError) -> [UInt8] {
        precondition(digest.count == 32, "a SHA-256 digest")
        return try primary.withTPM(tcti) { tpm, context throws(DaemonError) in
            var r = [UInt8](repeating: 0, count: 32)
            var s = [UInt8](repeating: 0, count: 32)
            let rc = la_tpm_key_sign(tpm, &context, blob, blob.count, auth, auth.count, digest, &r, &s)
            guard rc == 0 else { throw DaemonError.tpm("signing", rc) }
            return r + s
        }
    }

    /// The ECDH shared secret (the shared point's x coordinate) with the peer's X9.63 point,
    /// computed inside the TPM.
    public static func agree(
        peer: [UInt8],
        blob: [UInt8],
        auth: [UInt8],
        tcti: String,
        primary: TPMPrimaryContext
    ) throws(DaemonError) -> [UInt8] {
        precondition(peer.count == 65 && peer[0] == 0x04, "an uncompressed P-256 point")
        return try primary.withTPM(tcti) { tpm, context throws(DaemonError) in
            var shared = [UInt8](repeating: 0, count: 32)
            let rc = la_tpm_key_agree(
                tpm,
                &context,
                blob,
                blob.count,
                auth,
                auth.count,
                Array(peer[1..<33]),
                Array(peer[33..<65]),
                &shared
            )
            guard rc == 0 else { throw DaemonError.tpm("key agreement", rc) }
            return shared
        }
    }
}
