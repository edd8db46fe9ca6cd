import Crypto
import Foundation
import SwiftASN1
import TPMWire
import X509

/// A `tpm` attestation statement (WebAuthn L3 §8.3): {ver "2.0", alg, x5c, sig, certInfo, pubArea}.
/// The TPM states (`certInfo`, a TPMS_ATTEST of TPM2_Certify) that the object whose public area is
/// `pubArea` is loaded in it, with the hash of authenticator data and client data hash bound in;
/// its attestation key signs that (`sig`), and `x5c[0]` (the "aikCert") vouches for that key.
///
/// Scope, our own choice: ECC only — a P-256 credential key and an ES256 (-7) attestation key,
/// which is what laenclaved's TPM root makes; an RSA `pubArea` or another `alg` is refused as
/// `unsupportedAlgorithm`. Whether to trust the aikCert's chain is the caller's, as for `packed`.
struct TPMStatement {
    let version: String
    let algorithm: Int
    let chain: [Data]
    let signature: Data
    let certifyInfo: Data
    let publicArea: Data

    init(_ statement: CBOR) throws {
        let keys = ["ver", "alg", "x5c", "sig", "certInfo", "pubArea"]
        if statement["ecdaaKeyId"] != nil {
            throw WebAuthnError(.unsupportedAttestationFormat, "ECDAA attestation is not supported")
        }
        guard let entries = statement.mapValue, entries.count == keys.count,
            entries.allSatisfy({ entry in entry.key.textValue.map(keys.contains) == true })
        else {
            throw AttestationObject.malformed("tpm attestation must contain exactly \(keys.joined(separator: ", "))")
        }
        guard let version = statement["ver"]?.textValue, let algorithm = statement["alg"]?.intValue,
            let signature = statement["sig"]?.bytesValue, let certifyInfo = statement["certInfo"]?.bytesValue,
            let publicArea = statement["pubArea"]?.bytesValue
        else { throw AttestationObject.malformed("a tpm attestation field is of the wrong type") }
        guard case .array(let items)? = statement["x5c"], (1...AttestationObject.maxCertificates).contains(items.count)
        else {
            throw AttestationObject.malformed(
                "tpm \"x5c\" must be an array of 1…\(AttestationObject.maxCertificates) certificates"
            )
        }
        self.version = version
        self.algorithm = algorithm
        self.chain = try AttestationObject.certificateChain(items)
        self.signature = signature
        self.certifyInfo = certifyInfo
        self.publicArea = publicArea
    }

    /// §8.3's verification procedure; answers `x5c`.
    func verify(authenticatorData: AuthenticatorData, clientDataHash: Data) throws -> [Data] {
        guard version == "2.0" else {
            throw AttestationObject.malformed("tpm attestation \"ver\" is \(WebAuthnError.quote(version)), not \"2.0\"")
        }
        guard algorithm == COSEKey.Algorithm.es256.rawValue else {
            throw WebAuthnError(
                .unsupportedAlgorithm,
                "only ES256 (-7) tpm attestation keys are verified; this is \(algorithm)"
            )
        }
        guard let credential = authenticatorData.attestedCredential?.publicKey.p256 else {
            throw WebAuthnError(.unsupportedAlgorithm, "only P-256 credential keys are verified in a tpm attestation")
        }
        let area: TPMPublicArea
        do { area = try TPMPublicArea(publicArea) } catch {
            throw WebAuthnError(.unsupportedAlgorithm, "tpm pubArea is not a P-256 key's public area: \(error)")
        }
        guard area.curve == .p256, Data(area.x963) == credential.x963Representation else {
            throw AttestationObject.malformed("tpm pubArea is not the credential public key")
        }
        let info: TPMCertifyStatement
        do { info = try TPMCertifyStatement(certifyInfo) } catch {
            throw AttestationObject.malformed("tpm certInfo is not a TPM's certify statement: \(error)")
        }
        guard Data(info.extraData) == Data(SHA256.hash(data: authenticatorData.raw + clientDataHash)) else {
            throw AttestationObject.malformed("tpm certInfo's extraData is not the hash of authData and clientDataHash")
        }
        guard info.certifiedName == area.name else {
            throw AttestationObject.malformed("tpm certInfo names another object than pubArea")
        }
        let certificate = try AttestationObject.attestationCertificate(chain[0])
        guard let key = P256.Signing.PublicKey(certificate.publicKey) else {
            throw WebAuthnError(.unsupportedAlgorithm, "only P-256 aikCert keys are verified")
        }
        guard let parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature),
            key.isValidSignature(parsed, for: certifyInfo)
        else {
            throw WebAuthnError(
                .attestationSignatureInvalid,
                "tpm attestation signature does not verify with the aikCert's key"
            )
        }
        try Self.checkAttestationKeyCertificate(certificate, aaguid: authenticatorData.attestedCredential?.aaguid)
        return chain
    }

    /// §8.3.1: version 3; an empty subject; a subject alternative name naming the TPM's
    /// manufacturer, model and version (`TPMDescription`); the AIK certificate purpose; not a CA;
    /// an AAGUID extension, if present, equal to the credential's.
    static func checkAttestationKeyCertificate(_ certificate: Certificate, aaguid: Data?) throws {
        func refuse(_ why: String) -> WebAuthnError {
            WebAuthnError(.malformedAttestation, "the aikCert \(why) (WebAuthn §8.3.1)")
        }
        guard certificate.version == .v3 else { throw refuse("is not version 3") }
        guard certificate.subject.isEmpty else { throw refuse("has a subject") }
        guard (try? TPMDescription(certificate)) != nil else {
            throw refuse("does not name the TPM's manufacturer, model and version in its subject alternative name")
        }
        guard let usages = try? certificate.extensions.extendedKeyUsage,
            usages.contains(ExtendedKeyUsage.Usage(oid: TPMDescription.attestationKeyPurpose))
        else { throw refuse("lacks the AIK certificate purpose 2.23.133.8.3") }
        guard case .notCertificateAuthority? = try? certificate.extensions.basicConstraints else {
            throw refuse("is a CA certificate or has no basic constraints")
        }
        try AttestationObject.checkAAGUIDExtension(certificate, aaguid: aaguid, refuse: refuse)
    }
}

extension AttestationObject {
    /// Encodes a `tpm` attestation object, as a TPM-backed authenticator does. `certify` receives
    /// the 32 bytes the TPM must bind in (SHA-256 of authData ‖ clientDataHash: TPM2_Certify's
    /// qualifying data) and returns the TPM's statement, the attestation key's DER signature of it
    /// and the credential key's public area; `certificates` starts with the aikCert.
    public static func makeTPMAttestationObject(
        authenticatorData: AuthenticatorData,
        clientDataHash: Data,
        certificates: [Data],
        certify: (Data) throws -> (certifyInfo: Data, signature: Data, publicArea: Data)
    ) rethrows -> Data {
        let made = try certify(Data(SHA256.hash(data: authenticatorData.raw + clientDataHash)))
        let statement = CBOR.map([
            (key: .text("alg"), value: .int(COSEKey.Algorithm.es256.rawValue)),
            (key: .text("sig"), value: .bytes(made.signature)),
            (key: .text("ver"), value: .text("2.0")),
            (key: .text("x5c"), value: .array(certificates.map { .bytes($0) })),
            (key: .text("pubArea"), value: .bytes(made.publicArea)),
            (key: .text("certInfo"), value: .bytes(made.certifyInfo)),
        ])
        return encode(format: .tpm, statement: statement, authenticatorData: authenticatorData)
    }
}

/// What an aikCert (or a TPM maker's endorsement key certificate) says the TPM is: the TCG's
/// attributes in a directory name of its subject alternative name (TCG EK Credential Profile
/// §3.2.9), e.g. manufacturer "id:49424D00" (IBM, in the TCG's vendor registry).
public struct TPMDescription: Sendable, Equatable {
    public static let manufacturerOID: ASN1ObjectIdentifier = [2, 23, 133, 2, 1]
    public static let modelOID: ASN1ObjectIdentifier = [2, 23, 133, 2, 2]
    public static let versionOID: ASN1ObjectIdentifier = [2, 23, 133, 2, 3]
    /// tcg-kp-AIKCertificate: the extended key usage of an attestation key's certificate.
    public static let attestationKeyPurpose: ASN1ObjectIdentifier = [2, 23, 133, 8, 3]

    public var manufacturer: String
    public var model: String
    public var version: String

    public init(manufacturer: String, model: String, version: String) {
        self.manufacturer = manufacturer
        self.model = model
        self.version = version
    }

    /// The description in `certificate`'s subject alternative name; throws when it has none.
    public init(_ certificate: Certificate) throws {
        guard let names = try certificate.extensions.subjectAlternativeNames else {
            throw AttestationObject.malformed("no subject alternative name")
        }
        for case .directoryName(let name) in names {
            let attributes = name.flatMap { $0 }
            func value(_ type: ASN1ObjectIdentifier) -> String? {
                attributes.first { $0.type == type }.flatMap { String($0.value) }
            }
            if let manufacturer = value(Self.manufacturerOID), let model = value(Self.modelOID),
                let version = value(Self.versionOID)
            {
                self.init(manufacturer: manufacturer, model: model, version: version)
                return
            }
        }
        throw AttestationObject.malformed("no TPM manufacturer, model and version")
    }

    /// The subject alternative name that states this description (critical: the subject is empty).
    public func subjectAlternativeName() throws -> Certificate.Extension {
        let name = try DistinguishedName([
            RelativeDistinguishedName([
                .init(type: Self.manufacturerOID, utf8String: manufacturer),
                .init(type: Self.modelOID, utf8String: model),
                .init(type: Self.versionOID, utf8String: version),
            ])
        ])
        return try Certificate.Extension(SubjectAlternativeNames([.directoryName(name)]), critical: true)
    }
}

/// A path-validation policy for TPM certificates (a maker's endorsement key certificate, an
/// aikCert): their subject is empty, so their subject alternative name is critical; this policy
/// handles it by requiring the leaf's to be a `TPMDescription`.
public struct TPMDescriptionPolicy: VerifierPolicy {
    public let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [.X509ExtensionID.subjectAlternativeName]

    public init() {}

    public mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult
    {
        guard (try? TPMDescription(chain.leaf)) != nil else {
            return .failsToMeetPolicy(reason: "the certificate does not name a TPM's manufacturer, model and version")
        }
        return .meetsPolicy
    }
}
