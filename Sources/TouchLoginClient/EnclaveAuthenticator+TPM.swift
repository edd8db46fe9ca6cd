import CryptoKit
import Foundation
import TouchLoginAPI
import WebAuthn

extension EnclaveAuthenticator {
    /// The server's certificate for this machine's TPM attestation key (WebAuthn's aikCert, DER),
    /// when the server prefers `tpm` attestations (`attestationFormats`) and the daemon's root is
    /// a TPM whose maker stored an endorsement certificate; nil otherwise (the registration is then
    /// `packed`). The TPM proves the attestation key is its own by opening the credential the server
    /// wrapped for its endorsement key (TPM2_ActivateCredential). Where the server also takes another
    /// format, a failure here is nil too (the server then gets a `packed` statement); where it takes
    /// `tpm` only, the failure is the answer.
    public static func attestationKeyCertificate(
        options: PublicKeyCredentialCreationOptionsJSON,
        api: LoginAPIClient,
        token: String
    ) async throws -> Data? {
        guard options.attestation == "direct", let formats = options.attestationFormats,
            formats.contains(AttestationFormat.tpm.rawValue)
        else { return nil }
        do { return try await certifiedAttestationKey(api: api, token: token) } catch {
            guard formats.count > 1 else { throw error }
            return nil
        }
    }

    private static func certifiedAttestationKey(api: LoginAPIClient, token: String) async throws -> Data? {
        let endorsement: SecureEnclave.TPMEndorsement
        do { endorsement = try SecureEnclave.tpmEndorsement() } catch let error as SecureEnclaveKeyError {
            guard case .unavailable = error else { throw error }
            return nil
        }
        guard let endorsementCertificate = endorsement.endorsementCertificate else { return nil }
        let key = TPMAttestationKeyChallengeRequest(
            endorsementKey: endorsement.endorsementKey.base64URLEncodedString(),
            endorsementCertificate: endorsementCertificate.base64URLEncodedString(),
            attestationKey: endorsement.attestationKey.base64URLEncodedString()
        )
        let challenge = try await api.tpmAttestationKeyChallenge(token: token, key)
        guard let blob = Data(base64URLEncoded: challenge.credentialBlob),
            let encryptedSecret = Data(base64URLEncoded: challenge.encryptedSecret)
        else { throw ClientError("The server's attestation-key challenge is not base64url.") }
        let secret = try SecureEnclave.activateTPMCredential(credentialBlob: blob, encryptedSecret: encryptedSecret)
        let answer = try await api.tpmAttestationKeyCertificate(
            token: token,
            TPMAttestationKeyCertificateRequest(
                key: key,
                token: challenge.token,
                secret: secret.base64URLEncodedString()
            )
        )
        guard let certificate = Data(base64URLEncoded: answer.certificate) else {
            throw ClientError("The server's aikCert is not base64url.")
        }
        return certificate
    }
}
