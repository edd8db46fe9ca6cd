import Crypto
import Foundation
import SwiftASN1
import X509

/// The attestation statement formats this module can produce.
public enum AttestationFormat: String, Sendable {
    /// No attestation: `attStmt` is an empty map.
    case none
    /// Packed: self attestation (the credential key signs authData ‖ clientDataHash) or, with a
    /// certificate chain (`x5c`), basic attestation by the key in its first certificate.
    case packed
    /// TPM: the TPM's certify statement about the credential key, signed by an attestation key
    /// that a certificate (`x5c`, the "aikCert") vouches for (§8.3).
    case tpm
}

/// The attestation object of a registration (WebAuthn L3 §6.5.4):
/// a CBOR map {"fmt": text, "attStmt": map, "authData": bytes}.
///
/// Verification scope: `none`, `packed` self attestation, `packed` with a certificate chain
/// (`x5c`, ES256 attestation keys) and `tpm` (ECC P-256 credential and attestation keys; see
/// `TPMStatement`) are verified as far as the statement goes (§8.2 and §8.3: the signature and
/// the certificate requirements); whether to *trust* the chain — path validation against
/// roots the relying party chose — is the caller's (§7.1 steps 23–24), given
/// `VerifiedRegistration.attestationCertificates`. Every other format (`android-key`,
/// `apple`, `fido-u2f`, …) is rejected as `unsupportedAttestationFormat`. A relying party that
/// requests `attestation: "none"` (the default) gets `none` from browsers, which always verifies.
public struct AttestationObject: Sendable {
    /// Largest attestation object accepted. A `none` or self-attested ES256 object is ~200–300
    /// bytes; a chain of two certificates about 1.5 KB.
    public static let maxSize = 16 * 1024
    /// Most certificates in an `x5c` (the attestation certificate and its intermediates).
    public static let maxCertificates = 4

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

    /// Verifies the attestation statement per its format (§8.2 packed, §8.7 none). Answers the
    /// `x5c` chain (DER, attestation certificate first) of a basic attestation, else nothing.
    @discardableResult
    public func verifyStatement(clientDataHash: Data) throws -> [Data] {
        switch format {
        case AttestationFormat.none.rawValue:
            guard statement.mapValue?.isEmpty == true else {
                throw Self.malformed("\"none\" attestation must have an empty attStmt")
            }
            return []
        case AttestationFormat.packed.rawValue:
            if statement["x5c"] != nil { return try verifyPackedBasicAttestation(clientDataHash: clientDataHash) }
            try verifyPackedSelfAttestation(clientDataHash: clientDataHash)
            return []
        case AttestationFormat.tpm.rawValue:
            return try TPMStatement(statement).verify(
                authenticatorData: authenticatorData,
                clientDataHash: clientDataHash
            )
        default:
            throw WebAuthnError(
                .unsupportedAttestationFormat,
                "attestation format \(WebAuthnError.quote(format)) is not supported; request attestation \"none\""
            )
        }
    }

    private func verifyPackedSelfAttestation(clientDataHash: Data) throws {
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
            throw WebAuthnError(
                .unsupportedAlgorithm,
                "packed attestation alg \(algorithm) does not match the credential key's \(keyAlgorithm) (\(keyAlgorithm.rawValue))"
            )
        }
        guard credential.publicKey.isValidSignature(signature, for: authenticatorData.raw + clientDataHash) else {
            throw WebAuthnError(
                .attestationSignatureInvalid,
                "packed self-attestation signature does not verify with the credential public key"
            )
        }
    }

    /// §8.2 with `x5c`: the first certificate's key signed authData ‖ clientDataHash, and that
    /// certificate meets §8.2.1.
    private func verifyPackedBasicAttestation(clientDataHash: Data) throws -> [Data] {
        if statement["ecdaaKeyId"] != nil {
            throw WebAuthnError(.unsupportedAttestationFormat, "ECDAA attestation is not supported")
        }
        guard let entries = statement.mapValue, entries.count == 3 else {
            throw Self.malformed("packed attestation with a chain must contain exactly \"alg\", \"sig\" and \"x5c\"")
        }
        guard let algorithm = statement["alg"]?.intValue, let signature = statement["sig"]?.bytesValue else {
            throw Self.malformed("packed attestation \"alg\" or \"sig\" is missing or of the wrong type")
        }
        guard case .array(let items)? = statement["x5c"], (1...Self.maxCertificates).contains(items.count) else {
            throw Self.malformed("packed \"x5c\" must be an array of 1…\(Self.maxCertificates) certificates")
        }
        let chain = try Self.certificateChain(items)
        let certificate = try Self.attestationCertificate(chain[0])
        guard algorithm == COSEKey.Algorithm.es256.rawValue, let key = P256.Signing.PublicKey(certificate.publicKey)
        else {
            throw WebAuthnError(
                .unsupportedAlgorithm,
                "only ES256 attestation certificates (P-256) are verified; this one is alg \(algorithm)"
            )
        }
        guard let parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature),
            key.isValidSignature(parsed, for: authenticatorData.raw + clientDataHash)
        else {
            throw WebAuthnError(
                .attestationSignatureInvalid,
                "packed attestation signature does not verify with the attestation certificate's key"
            )
        }
        try Self.checkAttestationCertificate(certificate, aaguid: credential.aaguid)
        return chain
    }

    /// An `x5c` array's DER certificates, attestation certificate first.
    static func certificateChain(_ items: [CBOR]) throws -> [Data] {
        try items.map { item -> Data in
            guard let der = item.bytesValue else { throw Self.malformed("an \"x5c\" entry is not a byte string") }
            return der
        }
    }

    static func attestationCertificate(_ der: Data) throws -> Certificate {
        do { return try Certificate(derEncoded: Array(der)) } catch {
            throw Self.malformed("the attestation certificate is not a DER X.509 certificate")
        }
    }

    /// §8.2.1: version 3; subject C, O, OU "Authenticator Attestation" and CN; not a CA; and an
    /// AAGUID extension, if present, not critical and equal to the credential's.
    static func checkAttestationCertificate(_ certificate: Certificate, aaguid: Data) throws {
        func refuse(_ why: String) -> WebAuthnError {
            WebAuthnError(.malformedAttestation, "the attestation certificate \(why) (WebAuthn §8.2.1)")
        }
        guard certificate.version == .v3 else { throw refuse("is not version 3") }
        let attributes = certificate.subject.flatMap { $0 }
        func value(_ type: ASN1ObjectIdentifier) -> String? {
            attributes.first { $0.type == type }.flatMap { String($0.value) }
        }
        guard value(.RDNAttributeType.countryName) != nil, value(.RDNAttributeType.organizationName) != nil,
            value(.RDNAttributeType.commonName) != nil
        else { throw refuse("subject lacks C, O or CN") }
        guard value(.RDNAttributeType.organizationalUnitName) == Self.attestationUnit else {
            throw refuse("subject's OU is not \"Authenticator Attestation\"")
        }
        switch try? certificate.extensions.basicConstraints {
        case .notCertificateAuthority?: break
        case nil where certificate.extensions[oid: .X509ExtensionID.basicConstraints] == nil: break
        default: throw refuse("is a CA certificate or its basic constraints are unreadable")
        }
        try checkAAGUIDExtension(certificate, aaguid: aaguid, refuse: refuse)
    }

    /// §8.2.1 and §8.3.1 alike: an AAGUID extension, if present, not critical and equal to the
    /// credential's.
    static func checkAAGUIDExtension(
        _ certificate: Certificate,
        aaguid: Data?,
        refuse: (String) -> WebAuthnError
    ) throws {
        guard let stated = certificate.extensions[oid: Self.fidoAAGUIDExtension] else { return }
        guard !stated.critical else { throw refuse("marks its AAGUID extension critical") }
        guard let octets = try? ASN1OctetString(derEncoded: stated.value), Data(octets.bytes) == aaguid else {
            throw refuse("names another AAGUID than the credential's")
        }
    }

    /// FIDO's id-fido-gen-ce-aaguid. (KeyAttestation, which issues laenclaved's certificates and
    /// does not depend on this module, names it too; a test checks they agree.)
    public static let fidoAAGUIDExtension: ASN1ObjectIdentifier = [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4]
    /// The subject OU §8.2.1 requires of an attestation certificate.
    public static let attestationUnit = "Authenticator Attestation"

    /// Encodes an attestation object, as an authenticator does (`.tpm`: `makeTPMAttestationObject`). For `.packed`, `sign` receives
    /// authData ‖ clientDataHash and must return a signature by the credential's private key in
    /// its algorithm's WebAuthn encoding (self attestation; DER for ES256); for `.none` it is not
    /// called. With `certificates` (DER, attestation certificate first; `.packed` only), `sign`
    /// signs with the first certificate's key, ES256.
    public static func makeAttestationObject(
        authenticatorData: AuthenticatorData,
        format: AttestationFormat,
        clientDataHash: Data,
        certificates: [Data] = [],
        sign: (Data) throws -> Data
    ) rethrows -> Data {
        let statement: CBOR
        switch format {
        case .none:
            statement = .map([])
        case .packed:
            let signature = try sign(authenticatorData.raw + clientDataHash)
            let algorithm =
                certificates.isEmpty
                ? authenticatorData.attestedCredential?.publicKey.algorithm.rawValue ?? COSEKey.Algorithm.es256.rawValue
                : COSEKey.Algorithm.es256.rawValue
            var entries: [(key: CBOR, value: CBOR)] = [
                (key: .text("alg"), value: .int(algorithm)), (key: .text("sig"), value: .bytes(signature)),
            ]
            if !certificates.isEmpty {
                entries.append((key: .text("x5c"), value: .array(certificates.map { .bytes($0) })))
            }
            statement = .map(entries)
        case .tpm:
            preconditionFailure("a tpm statement is made by makeTPMAttestationObject")
        }
        return encode(format: format, statement: statement, authenticatorData: authenticatorData)
    }

    static func encode(format: AttestationFormat, statement: CBOR, authenticatorData: AuthenticatorData) -> Data {
        // CTAP2 canonical key order: shorter keys first.
        CBOR.map([
            (key: .text("fmt"), value: .text(format.rawValue)),
            (key: .text("attStmt"), value: statement),
            (key: .text("authData"), value: .bytes(authenticatorData.raw)),
        ]).encoded()
    }

    static func malformed(_ message: String) -> WebAuthnError {
        WebAuthnError(.malformedAttestation, message)
    }
}
