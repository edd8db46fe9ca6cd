import CryptoKit
import Foundation
import TouchLoginAPI
import WebAuthn

extension EnclaveAuthenticator {
    /// The server's certificate for this machine's TPM attestation key (WebAuthn's aikCert, DER),
    /// when the server prefers `tpm` attestations (`attestationFormats`) and the daemon's root is
    /// a TPM whose maker stored an endorsement certificate. Nil when the server does not ask for
    /// one, or when this daemon has no TPM root (or no maker's certificate) and the server takes
    /// `packed` too; `ClientError.Code.tpmAttestationUnavailable` when it takes only `tpm`. The TPM proves the
    /// attestation key is its own by opening the credential the server wrapped for its endorsement
    /// key (TPM2_ActivateCredential; `tpmCredentialRefused` when it cannot). Any other failure is
    /// thrown: whether to register as `packed` instead is the caller's (`mayRegisterPacked`).
    public static func attestationKeyCertificate(
        options: PublicKeyCredentialCreationOptionsJSON,
        api: LoginAPIClient,
        token: String
    ) async throws -> Data? {
        guard options.attestation == "direct", let formats = options.attestationFormats,
            formats.contains(AttestationFormat.tpm.rawValue)
        else { return nil }
        let endorsement: SecureEnclave.TPMEndorsement
        do { endorsement = try SecureEnclave.tpmEndorsement() } catch let error as SecureEnclaveKeyError {
            guard case .unavailable(let why) = error else { throw error }
            return try unavailable(formats, "this machine's laenclaved has no TPM root (\(why))")
        }
        guard let endorsementCertificate = endorsement.endorsementCertificate else {
            return try unavailable(formats, "this machine's TPM holds no maker's certificate")
        }
        let key = TPMAttestationKeyChallengeRequest(
            endorsementKey: endorsement.endorsementKey.base64URLEncodedString(),
            endorsementCertificate: endorsementCertificate.base64URLEncodedString(),
            attestationKey: endorsement.attestationKey.base64URLEncodedString()
        )
        let challenge = try await api.tpmAttestationKeyChallenge(token: token, key)
        guard let blob = Data(base64URLEncoded: challenge.credentialBlob),
            let encryptedSecret = Data(base64URLEncoded: challenge.encryptedSecret)
        else { throw ClientError(.serverUnsupported, "The server's attestation-key challenge is not base64url.") }
        let secret: Data
        do {
            secret = try SecureEnclave.activateTPMCredential(credentialBlob: blob, encryptedSecret: encryptedSecret)
        } catch {
            throw ClientError(
                .tpmCredentialRefused,
                "This TPM could not open the credential the server wrapped for it (\(error))."
            )
        }
        let answer = try await api.tpmAttestationKeyCertificate(
            token: token,
            TPMAttestationKeyCertificateRequest(
                key: key,
                token: challenge.token,
                secret: secret.base64URLEncodedString()
            )
        )
        guard let certificate = Data(base64URLEncoded: answer.certificate) else {
            throw ClientError(.serverUnsupported, "The server's aikCert is not base64url.")
        }
        return certificate
    }

    /// Whether, after `error` from `attestationKeyCertificate`, a `packed` registration is still
    /// what the server asked for: it takes `packed` too, and the TPM did not refuse the server's
    /// credential (a sign of a challenge made for another TPM, which must be seen, not papered over).
    public static func mayRegisterPacked(
        after error: any Error,
        options: PublicKeyCredentialCreationOptionsJSON
    ) -> Bool {
        options.attestationFormats?.contains(AttestationFormat.packed.rawValue) == true
            && ![.tpmCredentialRefused, .tpmAttestationUnavailable].contains((error as? ClientError)?.code)
    }

    private static func unavailable(_ formats: [String], _ why: String) throws -> Data? {
        guard formats.contains(AttestationFormat.packed.rawValue) else {
            throw ClientError(
                .tpmAttestationUnavailable,
                "This server binds only keys a TPM holds, and \(why)."
            )
        }
        return nil
    }
}
