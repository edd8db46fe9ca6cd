import Foundation

/// A registration that passed every check. Store `credentialID`, `publicKeyCBOR`, `signCount`,
/// `backupEligible` (and the user it belongs to); the rest is informational.
public struct VerifiedRegistration: Sendable {
    public let credentialID: Data
    public let publicKey: COSEKey
    /// The COSE key bytes exactly as the authenticator sent them; reload with `COSEKey(cbor:)`.
    public let publicKeyCBOR: Data
    public let signCount: UInt32
    public let aaguid: Data
    public let userVerified: Bool
    public let backupEligible: Bool
    public let backedUp: Bool
    /// The attestation statement format, "none", "packed" or "tpm".
    public let attestationFormat: String
    /// The statement's `x5c` (DER, attestation certificate first), its statement verified: a packed
    /// basic attestation's (whose leaf certifies the attestation key, laenclaved's the credential
    /// key itself) or a `tpm` statement's (the aikCert's, whose key is the TPM's attestation key,
    /// never the credential's); empty for `none` and self attestation. Trusting it is the relying
    /// party's call.
    public let attestationCertificates: [Data]
    /// A `tpm` statement's `pubArea`: the credential key's TPMT_PUBLIC as the TPM stated it (its
    /// attributes say whether the key can leave that TPM); nil for other formats.
    public let tpmPublicArea: Data?

    public init(
        credentialID: Data,
        publicKey: COSEKey,
        publicKeyCBOR: Data,
        signCount: UInt32,
        aaguid: Data,
        userVerified: Bool,
        backupEligible: Bool,
        backedUp: Bool,
        attestationFormat: String,
        attestationCertificates: [Data] = [],
        tpmPublicArea: Data? = nil
    ) {
        self.credentialID = credentialID
        self.publicKey = publicKey
        self.publicKeyCBOR = publicKeyCBOR
        self.signCount = signCount
        self.aaguid = aaguid
        self.userVerified = userVerified
        self.backupEligible = backupEligible
        self.backedUp = backedUp
        self.attestationFormat = attestationFormat
        self.attestationCertificates = attestationCertificates
        self.tpmPublicArea = tpmPublicArea
    }
}

/// An assertion that passed every check. Persist `signCount` as the credential's new stored count.
public struct VerifiedAssertion: Sendable {
    public let signCount: UInt32
    public let userVerified: Bool
    /// Compare with the value stored at registration: BE must never change for a credential.
    public let backupEligible: Bool
    public let backedUp: Bool

    public init(signCount: UInt32, userVerified: Bool, backupEligible: Bool, backedUp: Bool) {
        self.signCount = signCount
        self.userVerified = userVerified
        self.backupEligible = backupEligible
        self.backedUp = backedUp
    }
}
