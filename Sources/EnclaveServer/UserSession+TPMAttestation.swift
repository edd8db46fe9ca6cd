import EnclaveCore
import EnclaveProtocol
import Foundation

/// The TPM root's attestation on the wire (issue 31, item 6): the endorsement, a credential's
/// activation and a key's certify statement. Any app with an identity of its own may ask the first
/// two (not interpreters, which run others' code); a certify statement only of the app's own key,
/// while it can still be used.
///
/// Our choice, said in the docs: the endorsement certificate names this TPM, and one attestation
/// key serves every app and user of the daemon, so apps that hand them to servers are linkable
/// there as this machine — as a TPM-attested Windows Hello key is; Apple's App Attest keys are per
/// app.
extension UserSession {
    func tpmAttest(_ r: KeyRequest, app: AppIdentity) async throws -> KeyReply {
        guard let tpmAttestation else {
            _ = try keyEngine.tpmRoot()
            throw DaemonError(.keyNotAvailable, "the TPM attestation key is not usable")
        }
        _ = try owner(app)
        switch r.operation {
        case .tpmEndorsement:
            return KeyReply(tpm: try await keyEngine.tpmEndorsement(tpmAttestation))
        case .tpmActivateCredential:
            guard let credential = r.tpmCredential,
                (1...TPMCredentialValue.maxSize).contains(credential.credentialBlob.count),
                (1...TPMCredentialValue.maxSize).contains(credential.encryptedSecret.count)
            else {
                throw DaemonError(
                    .invalidParameter,
                    "tpmActivateCredential needs a credential blob and an encrypted secret of 1…\(TPMCredentialValue.maxSize) bytes each"
                )
            }
            return KeyReply(tpm: try await keyEngine.tpmActivate(credential, tpmAttestation))
        case .tpmCertify:
            let key = try unseal(r.blob, kind: r.kind, app: app)
            // A key that can never be used again is not vouched for.
            do throws(AccessDenial) {
                var proofs = try await proofs([(key, key.protected)], rules: .every)
                if case .denied(let denial) = proofs.next() { throw denial }
            } catch { return KeyReply(error) }
            guard let digest = r.digest, digest.count == 32 else {
                throw DaemonError(.invalidParameter, "tpmCertify needs 32 bytes of data to bind in")
            }
            let (value, signature) = try await keyEngine.tpmCertify(key, qualifyingData: digest, tpmAttestation)
            return KeyReply(
                signature: signature.rawRepresentation,
                signatureDER: signature.derRepresentation,
                tpm: value
            )
        default:
            preconditionFailure("\(r.operation) is not a TPM attestation")
        }
    }
}
