import Foundation

/// Secure Enclave keys on the wire. A key's `dataRepresentation` is the daemon's sealed blob:
/// only this daemon (its master key), for this user and app, can open it.
public struct KeyRequest: Codable, Sendable, Equatable {
    public enum Operation: String, Codable, Sendable {
        /// Generate a key; answers the blob and the public key.
        case create
        /// Open a blob: answers the public key (checks it belongs to this user and app).
        case open
        /// ECDSA over a SHA-256 digest; needs the key's access control.
        case sign
        /// ECDH with a peer's public key; answers the shared secret; needs the key's access control.
        case agree
        /// Checks a signature with the key's public half (no authentication).
        case verify
        /// Answers a certificate chain for the key's public half stating how it is protected and
        /// by what daemon (`certificates`: the key's, then the attestation key's); no authentication,
        /// refused for a key that can no longer be used.
        case attest
        /// Answers this daemon's attestation root certificate (`certificates`, one); needs no blob.
        case attestationRoot
        /// On a TPM root: the TPM's endorsement key, its maker's certificate and the daemon's
        /// attestation key (`tpm`); needs no blob.
        case tpmEndorsement
        /// On a TPM root: the credential a server wrapped for the endorsement key and the
        /// attestation key (`tpmCredential`), as the TPM gives it back (`tpm.credential`).
        case tpmActivateCredential
        /// On a TPM root: the TPM's certify statement about a key it holds (`blob`), with `digest`
        /// bound in, signed by the attestation key (`tpm`, `signature`); no authentication, refused
        /// for a key that can no longer be used.
        case tpmCertify
    }
    /// What a key is for. `general`: SecKey's Secure Enclave keys, which sign and agree both (as
    /// Apple's made by `SecKeyCreateRandomKey` do); CryptoKit's keys are one or the other.
    public enum Kind: String, Codable, Sendable, CaseIterable { case signing, keyAgreement, general }

    public var operation: Operation
    public var kind: Kind
    public var blob: Data?
    public var accessControl: AccessControlValue?
    /// SHA-256 digest to sign or verify (32 bytes).
    public var digest: Data?
    /// Or the message itself (at most what a frame carries); the daemon hashes it with SHA-256.
    public var message: Data?
    /// The peer's public key (X9.63) for agreement.
    public var peerPublicKey: Data?
    /// For tpmActivateCredential.
    public var tpmCredential: TPMCredentialValue?
    /// For verify: the DER (X9.62) signature to check against `digest`.
    public var signature: Data?
    /// For agree: derive this many bytes from the secret (ANSI X9.63) and answer those instead.
    public var derivation: KeyDerivation?
    public var context: String
    public var reason: String?
    public var interactionNotAllowed: Bool
    /// A prompt is drawn on the terminal this connection handed over (`EvaluationOptions.onTerminal`).
    public var onTerminal: Bool

    public init(
        operation: Operation,
        kind: Kind,
        blob: Data? = nil,
        accessControl: AccessControlValue? = nil,
        digest: Data? = nil,
        message: Data? = nil,
        peerPublicKey: Data? = nil,
        signature: Data? = nil,
        derivation: KeyDerivation? = nil,
        tpmCredential: TPMCredentialValue? = nil,
        context: String,
        reason: String? = nil,
        interactionNotAllowed: Bool = false,
        onTerminal: Bool = false
    ) {
        self.tpmCredential = tpmCredential
        self.operation = operation
        self.kind = kind
        self.blob = blob
        self.accessControl = accessControl
        self.digest = digest
        self.signature = signature
        self.message = message
        self.derivation = derivation
        self.peerPublicKey = peerPublicKey
        self.context = context
        self.reason = reason
        self.interactionNotAllowed = interactionNotAllowed
        self.onTerminal = onTerminal
    }
}

/// A credential wrapped for a TPM (TPM2_MakeCredential's output, marshalled as the TPM takes it).
public struct TPMCredentialValue: Codable, Sendable, Equatable {
    /// TPM2B_ID_OBJECT.
    public var credentialBlob: Data
    /// TPM2B_ENCRYPTED_SECRET.
    public var encryptedSecret: Data
    /// Larger than either ever is (a few hundred bytes).
    public static let maxSize = 1024

    public init(credentialBlob: Data, encryptedSecret: Data) {
        self.credentialBlob = credentialBlob
        self.encryptedSecret = encryptedSecret
    }
}

/// What a TPM root answers for attestation: the TPM's structures as it marshals them.
public struct TPMAttestationValue: Codable, Sendable, Equatable {
    /// The endorsement key's template: "ecc-p256" (TCG L-2) or "ecc-p384" (H-3).
    public var endorsementTemplate: String
    /// The endorsement key's TPMT_PUBLIC.
    public var endorsementKey: Data
    /// Its maker's certificate (DER) from the TPM's NV; nil when the maker stored none.
    public var endorsementCertificate: Data?
    /// The daemon's attestation key's TPMT_PUBLIC.
    public var attestationKey: Data
    /// tpmActivateCredential: the credential.
    public var credential: Data?
    /// tpmCertify: the TPMS_ATTEST the TPM wrote, and the certified key's TPMT_PUBLIC.
    public var certifyInfo: Data?
    public var keyPublicArea: Data?

    public init(
        endorsementTemplate: String,
        endorsementKey: Data,
        endorsementCertificate: Data?,
        attestationKey: Data,
        credential: Data? = nil,
        certifyInfo: Data? = nil,
        keyPublicArea: Data? = nil
    ) {
        self.endorsementTemplate = endorsementTemplate
        self.endorsementKey = endorsementKey
        self.endorsementCertificate = endorsementCertificate
        self.attestationKey = attestationKey
        self.credential = credential
        self.certifyInfo = certifyInfo
        self.keyPublicArea = keyPublicArea
    }
}

/// ANSI X9.63 key derivation from an agreement's shared secret, done in the daemon so the
/// derivation is swift-crypto's own (a shared secret cannot be rebuilt from bytes in an app).
public struct KeyDerivation: Codable, Sendable, Equatable {
    public enum Hash: String, Codable, Sendable { case sha1, sha256, sha384, sha512 }
    public var hash: Hash
    public var sharedInfo: Data
    /// Bytes to derive: 1…65536.
    public var byteCount: Int

    public init(hash: Hash, sharedInfo: Data, byteCount: Int) {
        self.hash = hash
        self.sharedInfo = sharedInfo
        self.byteCount = byteCount
    }
}

public struct KeyReply: Codable, Sendable, Equatable {
    public enum Problem: String, Codable, Sendable {
        /// The blob is not a key of this daemon, user and app, or is damaged.
        case invalidKey
        /// A `.biometryCurrentSet` key after an enrolment change: permanently unusable.
        case invalidated
        /// The access control was not satisfied; `authenticationError` says how.
        case authentication
        case invalidParameter
        case notAvailable
    }
    public var problem: Problem?
    public var message: String?
    /// With `.authentication`: the LAError code.
    public var authenticationError: LAErrorCode?
    public var blob: Data?
    /// X9.63 (uncompressed) public key.
    public var publicKey: Data?
    /// Raw r‖s signature (64 bytes).
    public var signature: Data?
    /// The same signature in DER (X9.62), as SecKey's ecdsaSignature…X962 algorithms give it.
    public var signatureDER: Data?
    /// For verify: whether the signature is valid.
    public var valid: Bool?
    /// The ECDH shared secret: the x-coordinate of the shared point (32 bytes).
    public var sharedSecret: Data?
    /// With a derivation: the derived bytes (and no shared secret).
    public var derivedKey: Data?
    /// For attest and attestationRoot: DER certificates.
    public var certificates: [Data]?
    /// For the tpm… operations.
    public var tpm: TPMAttestationValue?

    public init(
        problem: Problem? = nil,
        message: String? = nil,
        authenticationError: LAErrorCode? = nil,
        blob: Data? = nil,
        publicKey: Data? = nil,
        signature: Data? = nil,
        signatureDER: Data? = nil,
        valid: Bool? = nil,
        sharedSecret: Data? = nil,
        derivedKey: Data? = nil,
        certificates: [Data]? = nil,
        tpm: TPMAttestationValue? = nil
    ) {
        self.tpm = tpm
        self.problem = problem
        self.message = message
        self.authenticationError = authenticationError
        self.blob = blob
        self.publicKey = publicKey
        self.signature = signature
        self.sharedSecret = sharedSecret
        self.signatureDER = signatureDER
        self.valid = valid
        self.derivedKey = derivedKey
        self.certificates = certificates
    }
}
