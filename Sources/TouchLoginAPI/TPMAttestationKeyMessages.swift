import Foundation

/// A TPM's attestation key presented for certification (`POST /api/tpm/attestation-key/challenge`):
/// the TPM's endorsement key and its maker's certificate, and the attestation key. Binary fields are
/// base64url: TPMT_PUBLIC as the TPM marshals it, the certificate in DER.
public struct TPMAttestationKeyChallengeRequest: Codable, Sendable {
    public var endorsementKey: String
    public var endorsementCertificate: String
    public var attestationKey: String
    public init(endorsementKey: String, endorsementCertificate: String, attestationKey: String) {
        self.endorsementKey = endorsementKey
        self.endorsementCertificate = endorsementCertificate
        self.attestationKey = attestationKey
    }
}

/// A credential (TPM2_MakeCredential) only the TPM holding that endorsement key can open, and only
/// for that attestation key: `TPM2_ActivateCredential` answers the secret to send back with `token`.
public struct TPMAttestationKeyChallengeResponse: Codable, Sendable {
    public var credentialBlob: String
    public var encryptedSecret: String
    public var token: String
    public init(credentialBlob: String, encryptedSecret: String, token: String) {
        self.credentialBlob = credentialBlob
        self.encryptedSecret = encryptedSecret
        self.token = token
    }
}

/// `POST /api/tpm/attestation-key/certificate`: the challenge's fields again, its token and the
/// secret the TPM activated.
public struct TPMAttestationKeyCertificateRequest: Codable, Sendable {
    public var key: TPMAttestationKeyChallengeRequest
    public var token: String
    public var secret: String
    public init(key: TPMAttestationKeyChallengeRequest, token: String, secret: String) {
        self.key = key
        self.token = token
        self.secret = secret
    }
}

/// The attestation key's certificate (WebAuthn's aikCert, DER base64url) and the server's
/// attestation-key CA root (PEM), which a `tpm` statement's `x5c` chains to.
public struct TPMAttestationKeyCertificateResponse: Codable, Sendable {
    public var certificate: String
    public var root: String
    public init(certificate: String, root: String) {
        self.certificate = certificate
        self.root = root
    }
}
