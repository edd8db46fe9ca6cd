import BlockingPool
import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation

/// Where new Secure Enclave keys' private halves live, and where each key's signatures and
/// agreements run: in the daemon (the software root), or inside the TPM (the TPM root), where the
/// private scalar never exists outside it. A key is used where it was made, whatever the root is
/// now: a key made in the daemon before a move to the TPM root keeps working.
///
/// On the TPM, each user's engine admits at most `usesPerUser` key uses running or waiting for the
/// TPM's one thread and refuses the next at once: a TPM takes 25–200 ms a signature, and one
/// user's flood must not stall the other users' keys and rollback counter. "One user" is a share
/// (`ShareOwner`): the sessions of a user's subordinate uids, each its own keychain, use their
/// owner's one admission (`TPMAdmissions`).
enum KeyEngine: Sendable {
    case software
    case tpm(tcti: String, primary: TPMPrimaryContext, admission: BlockingPool.Admission?)

    static let usesPerUser = 4

    /// The daemon's engine on a TPM root (each user's comes from `forUser`).
    static func tpm(tcti: String) -> KeyEngine { .tpm(tcti: tcti, primary: TPMPrimaryContext(), admission: nil) }

    /// This engine with a user's admission to the TPM (asked for only on a TPM root).
    func forUser(admission: () -> BlockingPool.Admission) -> KeyEngine {
        guard case .tpm(let tcti, let primary, _) = self else { return self }
        return .tpm(tcti: tcti, primary: primary, admission: admission())
    }

    /// The private half of a new key of `kind`.
    func create(_ kind: KeyRequest.Kind) async throws -> (privateKey: Data, tpm: TPMKeyMaterial?) {
        switch self {
        case .software:
            let raw =
                kind == .keyAgreement
                ? P256.KeyAgreement.PrivateKey().rawRepresentation : P256.Signing.PrivateKey().rawRepresentation
            return (raw, nil)
        case .tpm(let tcti, let primary, _):
            let auth = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
            let made = try await onTPM("make the key") {
                try TPMDevice.createKey(
                    signing: kind != .keyAgreement,
                    agreement: kind != .signing,
                    auth: auth,
                    tcti: tcti,
                    primary: primary
                )
            }
            return (Data(), TPMKeyMaterial(blob: Data(made.blob), auth: Data(auth), publicKey: Data(made.publicKey)))
        }
    }

    /// The ECDSA signature of a SHA-256 digest.
    func sign(_ digest: PrehashedSHA256, with key: KeyBlob) async throws -> P256.Signing.ECDSASignature {
        guard let held = key.tpm else {
            return try P256.Signing.PrivateKey(rawRepresentation: key.privateKey).signature(for: digest)
        }
        let (tcti, primary) = try tpm(for: held)
        let raw = try await onTPM("sign") {
            try TPMDevice.sign(
                digest: digest.bytes,
                blob: Array(held.blob),
                auth: Array(held.auth),
                tcti: tcti,
                primary: primary
            )
        }
        return try P256.Signing.ECDSASignature(rawRepresentation: raw)
    }

    /// The raw ECDH shared secret with `peer` (its x coordinate, 32 bytes).
    func agree(_ peer: P256.KeyAgreement.PublicKey, with key: KeyBlob) async throws -> Data {
        guard let held = key.tpm else {
            return try P256.KeyAgreement.PrivateKey(rawRepresentation: key.privateKey)
                .sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Data($0) }
        }
        let (tcti, primary) = try tpm(for: held)
        return Data(
            try await onTPM("agree") {
                try TPMDevice.agree(
                    peer: Array(peer.x963Representation),
                    blob: Array(held.blob),
                    auth: Array(held.auth),
                    tcti: tcti,
                    primary: primary
                )
            }
        )
    }

    private func tpm(for key: TPMKeyMaterial) throws -> (String, TPMPrimaryContext) {
        try tpmRoot(
            "this key is held inside a TPM, and this daemon runs on the software root: it is usable only with the TPM root it was made on"
        )
    }

    /// The TPM and its primary's context; on the software root, `notAvailable` with `why`.
    func tpmRoot(
        _ why: String =
            "this daemon runs on the software root: there is no TPM to attest (tpm = …, laenclaved --move-to-tpm)"
    ) throws -> (String, TPMPrimaryContext) {
        guard case .tpm(let tcti, let primary, _) = self else {
            throw DaemonError(.keyNotAvailable, why)
        }
        return (tcti, primary)
    }

    /// A TPM command sequence on the TPM's own thread (one at a time, beside the rollback
    /// counter's), through the user's admission. A TPM that fails says so as an unavailable key, in
    /// the TSS's words.
    func onTPM<T: Sendable>(_ what: String, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        guard case .tpm(_, _, let admission) = self, let admission else {
            preconditionFailure("a user's engine (forUser) uses the TPM")
        }
        do { return try await admission.run(work) } catch let error as DaemonError where error.code == .tpmCommandFailed
        {
            throw DaemonError(.keyNotAvailable, "the TPM could not \(what): \(error)")
        } catch is BlockingPool.Admission.Full {
            throw DaemonError(
                .keyNotAvailable,
                "the TPM is busy with \(Self.usesPerUser) of this user's key operations already: try again when one has ended"
            )
        }
    }
}
