import Crypto
import Foundation

/// The attestation statement formats this module can produce.
public enum AttestationFormat: String, Sendable {
    /// No attestation: `attStmt` is an empty map.
    case none
    /// Packed self attestation: the credential key signs authData ‖ clientDataHash.
    case packed
}

/// The attestation object of a registration (WebAuthn L3 §6.5.4):
/// a CBOR map {"fmt": text, "attStmt": map, "authData": bytes}.
///
/// Verification scope: `none`, and `packed` *self* attestation (no `x5c`), are verified fully.
/// Full attestation — `packed` with an `x5c` certificate chain, and every other format (`tpm`,
/// `android-key`, `apple`, `fido-u2f`, …) — is rejected as `unsupportedAttestationFormat`, because
/// verifying it needs certificate-path validation against trust anchors (e.g. FIDO MDS) that this
/// module deliberately does not do. A relying party that requests `attestation: "none"` (the
/// default) gets `none` from browsers, which always verifies here.
public struct AttestationObject: Sendable {
    /// Largest attestation object accepted. A `none` or self-attested ES256 object is ~200–300
    /// bytes; certificate chains are what make real ones big, and those are unsupported anyway.
    public static let maxSize = 16 * 1024

    public let format: String
    public let statement: CBOR
    public let authenticatorData: AuthenticatorData
    public let raw: Data

    /// Parses the structure. Also requires attested credential data, which a registration always
    /// carries. Does not verify the statement; see `verifyStatement(clientDataHash:)`.
    public init(_ raw: Data) throws {
        guard raw.count <= Self.maxSize else {
            throw WebAuthnError(.tooLarge, "attestation object is \(raw.count) bytes; the limit is \(Self.maxSize)")
        }
        let object = try CBOR.decode(raw)
        guard case .map = object else {
            throw Self.malformed("attestation object is not a CBOR map")
        }
        guard let format = object["fmt"]?.textValue else {
            throw Self.malformed("\"fmt\" is missing or not a text string")
        }
        guard let statement = object["attStmt"], case .map = statement else {
            throw Self.malformed("\"attStmt\" is missing or not a map")
        }
        guard let authData = object["authData"]?.bytesValue else {
            throw Self.malformed("\"authData\" is missing or not a byte string")
        }
        let authenticatorData = try AuthenticatorData(authData)
        guard authenticatorData.attestedCredential != nil else {
            throw Self.malformed("authenticator data has no attested credential data (AT flag clear)")
        }
        self.format = format
        self.statement = statement
        self.authenticatorData = authenticatorData
        self.raw = Data(raw)
    }

    /// The attested credential; always present after a successful parse.
    public var credential: AuthenticatorData.AttestedCredential {
        authenticatorData.attestedCredential!
    }

    /// Verifies the attestation statement per its format (§8.2 packed, §8.7 none).
    public func verifyStatement(clientDataHash: Data) throws {
        switch format {
        case AttestationFormat.none.rawValue:
            guard statement.mapValue?.isEmpty == true else {
                throw Self.malformed("\"none\" attestation must have an empty attStmt")
            }
        case AttestationFormat.packed.rawValue:
            try verifyPackedSelfAttestation(clientDataHash: clientDataHash)
        default:
            throw WebAuthnError(.unsupportedAttestationFormat,
                                "attestation format \(WebAuthnError.quote(format)) is not supported; request attestation \"none\"")
        }
    }

    private func verifyPackedSelfAttestation(clientDataHash: Data) throws {
        if statement["x5c"] != nil {
            throw WebAuthnError(.unsupportedAttestationFormat,
                                "packed attestation with a certificate chain (x5c) is not verified; only self attestation is supported")
        }
        if statement["ecdaaKeyId"] != nil {
            throw WebAuthnError(.unsupportedAttestationFormat, "ECDAA attestation is not supported")
        }
        guard let entries = statement.mapValue, entries.count == 2 else {
            throw Self.malformed("packed self attestation must contain exactly \"alg\" and \"sig\"")
        }
        guard let algorithm = statement["alg"]?.intValue else {
            throw Self.malformed("packed attestation \"alg\" is missing or not an integer")
        }
        guard let signature = statement["sig"]?.bytesValue else {
            throw Self.malformed("packed attestation \"sig\" is missing or not a byte string")
        }
        // Self attestation is signed by the credential key, with the credential key's algorithm.
        let keyAlgorithm = credential.publicKey.algorithm
        guard algorithm == keyAlgorithm.rawValue else {
            throw WebAuthnError(.unsupportedAlgorithm,
                                "packed attestation alg \(algorithm) does not match the credential key's \(keyAlgorithm) (\(keyAlgorithm.rawValue))")
        }
        guard credential.publicKey.isValidSignature(signature, for: authenticatorData.raw + clientDataHash) else {
            throw WebAuthnError(.attestationSignatureInvalid, "packed self-attestation signature does not verify with the credential public key")
        }
    }

    /// Encodes an attestation object, as an authenticator does. For `.packed`, `sign` receives
    /// authData ‖ clientDataHash and must return a signature by the credential's private key in
    /// its algorithm's WebAuthn encoding (self attestation; DER for ES256); for `.none` it is not
    /// called.
    public static func makeAttestationObject(
        authenticatorData: AuthenticatorData,
        format: AttestationFormat,
        clientDataHash: Data,
        sign: (Data) throws -> Data
    ) rethrows -> Data {
        let statement: CBOR
        switch format {
        case .none:
            statement = .map([])
        case .packed:
            let signature = try sign(authenticatorData.raw + clientDataHash)
            statement = .map([
                (key: .text("alg"), value: .int(authenticatorData.attestedCredential?.publicKey.algorithm.rawValue ?? COSEKey.Algorithm.es256.rawValue)),
                (key: .text("sig"), value: .bytes(signature)),
            ])
        }
        // CTAP2 canonical key order: shorter keys first.
        return CBOR.map([
            (key: .text("fmt"), value: .text(format.rawValue)),
            (key: .text("attStmt"), value: statement),
            (key: .text("authData"), value: .bytes(authenticatorData.raw)),
        ]).encoded()
    }

    private static func malformed(_ message: String) -> WebAuthnError {
        WebAuthnError(.malformedAttestation, message)
    }
}
