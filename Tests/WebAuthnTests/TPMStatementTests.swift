import Crypto
import Foundation
import SwiftASN1
import TPMWire
import X509
import XCTest

@testable import WebAuthn

/// The `tpm` statement (§8.3) with a software stand-in for the TPM: the public area and certify
/// statement marshalled as a TPM does, signed by a P-256 "attestation key" whose aikCert is made
/// here. Each row changes one thing and names the error it must give.
final class TPMStatementTests: XCTestCase {
    let credentialKey = P256.Signing.PrivateKey()
    let attestationKey = P256.Signing.PrivateKey()
    let clientDataHash = Data(SHA256.hash(data: Data("client data".utf8)))

    var authenticatorData: AuthenticatorData {
        AuthenticatorData(
            rpID: "example.com",
            flags: [.userPresent, .userVerified],
            signCount: 0,
            attestedCredential: .init(
                credentialID: Data(repeating: 1, count: 16),
                publicKey: COSEKey(credentialKey.publicKey)
            )
        )
    }

    static func publicArea(_ key: P256.Signing.PublicKey) -> [UInt8] {
        TPMStandIn.publicArea(
            x963: key.x963Representation,
            attributes: [.fixedTPM, .fixedParent, .sensitiveDataOrigin, .userWithAuth, .sign]
        )
    }

    /// An aikCert for `key`, shaped as §8.3.1 asks unless told otherwise.
    func aikCertificate(
        for key: P256.Signing.PrivateKey,
        subject: Bool = false,
        alternativeName: Bool = true,
        purpose: Bool = true,
        authority: Bool = false,
        aaguid: Data? = nil
    ) throws -> Data {
        let issuerKey = P256.Signing.PrivateKey()
        var extensions = try Certificate.Extensions {
            Critical(authority ? BasicConstraints.isCertificateAuthority(maxPathLength: nil) : .notCertificateAuthority)
        }
        if alternativeName {
            try extensions.append(
                TPMDescription(manufacturer: "id:49424D00", model: "swtpm", version: "id:20191023")
                    .subjectAlternativeName()
            )
        }
        if purpose {
            try extensions.append(
                Certificate.Extension(
                    ExtendedKeyUsage([.init(oid: TPMDescription.attestationKeyPurpose)]),
                    critical: false
                )
            )
        }
        if let aaguid {
            var s = DER.Serializer()
            try s.serialize(ASN1OctetString(contentBytes: ArraySlice(aaguid)))
            try extensions.append(
                Certificate.Extension(
                    oid: AttestationObject.fidoAAGUIDExtension,
                    critical: false,
                    value: ArraySlice(s.serializedBytes)
                )
            )
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: Date() - 60,
            notValidAfter: Date() + 3600,
            issuer: try DistinguishedName { CommonName("test AK CA") },
            subject: subject ? try DistinguishedName { CommonName("aik") } : DistinguishedName(),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: .init(issuerKey)
        )
        var s = DER.Serializer()
        try s.serialize(certificate)
        return Data(s.serializedBytes)
    }

    /// A `tpm` attestation object; `certify` may change what the stand-in TPM states.
    func object(
        certificate: Data? = nil,
        signer: P256.Signing.PrivateKey? = nil,
        publicAreaOf: P256.Signing.PublicKey? = nil,
        nameOf: P256.Signing.PublicKey? = nil,
        extraData: Data? = nil,
        magic: UInt32 = 0xFF54_4347
    ) throws -> Data {
        let aik = try certificate ?? aikCertificate(for: attestationKey)
        return try AttestationObject.makeTPMAttestationObject(
            authenticatorData: authenticatorData,
            clientDataHash: clientDataHash,
            certificates: [aik]
        ) { bound in
            let area = Self.publicArea(publicAreaOf ?? credentialKey.publicKey)
            let named = try TPMPublicArea(Self.publicArea(nameOf ?? credentialKey.publicKey)).name
            let info = TPMStandIn.certifyStatement(extraData: extraData ?? bound, certifiedName: named, magic: magic)
            let signature = try (signer ?? attestationKey).signature(for: info).derRepresentation
            return (Data(info), signature, Data(area))
        }
    }

    func verify(_ object: Data) throws -> [Data] {
        try AttestationObject(object).verifyStatement(clientDataHash: clientDataHash)
    }

    func testAStatementTheTPMMadeVerifiesAndAnswersTheChain() throws {
        let aik = try aikCertificate(for: attestationKey, aaguid: Data(count: 16))
        XCTAssertEqual(try verify(try object(certificate: aik)), [aik])
        XCTAssertEqual(try AttestationObject(try object()).format, "tpm")
    }

    func testEachFalseStatementIsRefusedWithItsReason() throws {
        let other = P256.Signing.PrivateKey()
        let rows: [(String, WebAuthnError.Code, () throws -> Data)] = [
            ("signed by another key", .attestationSignatureInvalid, { try self.object(signer: other) }),
            ("pubArea of another key", .malformedAttestation, { try self.object(publicAreaOf: other.publicKey) }),
            ("certInfo names another key", .malformedAttestation, { try self.object(nameOf: other.publicKey) }),
            ("another extraData", .malformedAttestation, { try self.object(extraData: Data(count: 32)) }),
            ("not TPM-generated", .malformedAttestation, { try self.object(magic: 0x1234_5678) }),
            (
                "aikCert with a subject", .malformedAttestation,
                { try self.object(certificate: self.aikCertificate(for: self.attestationKey, subject: true)) }
            ),
            (
                "aikCert without the TPM's name", .malformedAttestation,
                { try self.object(certificate: self.aikCertificate(for: self.attestationKey, alternativeName: false)) }
            ),
            (
                "aikCert without the AIK purpose", .malformedAttestation,
                { try self.object(certificate: self.aikCertificate(for: self.attestationKey, purpose: false)) }
            ),
            (
                "aikCert of a CA", .malformedAttestation,
                { try self.object(certificate: self.aikCertificate(for: self.attestationKey, authority: true)) }
            ),
            (
                "aikCert of another AAGUID", .malformedAttestation,
                {
                    try self.object(
                        certificate: self.aikCertificate(
                            for: self.attestationKey,
                            aaguid: Data(repeating: 9, count: 16)
                        )
                    )
                }
            ),
        ]
        for (what, code, make) in rows {
            XCTAssertThrowsWebAuthn(code, try verify(try make()), what)
        }
    }

    func testTheStatementsShapeIsChecked() throws {
        let made = try CBOR.decode(try object())
        let statement = try XCTUnwrap(made["attStmt"]?.mapValue)
        func with(_ change: (inout [(key: CBOR, value: CBOR)]) -> Void) -> Data {
            var entries = statement
            change(&entries)
            return CBOR.map([
                (key: .text("fmt"), value: .text("tpm")), (key: .text("attStmt"), value: .map(entries)),
                (key: .text("authData"), value: made["authData"]!),
            ]).encoded()
        }
        func replacing(_ key: String, _ value: CBOR) -> Data {
            with { entries in entries = entries.map { $0.key.textValue == key ? (key: $0.key, value: value) : $0 } }
        }
        let rows: [(String, WebAuthnError.Code, Data)] = [
            ("empty", .malformedAttestation, with { $0 = [] }),
            ("an extra key", .malformedAttestation, with { $0.append((key: .text("extra"), value: .int(1))) }),
            ("no certInfo", .malformedAttestation, with { $0.removeAll { $0.key.textValue == "certInfo" } }),
            ("ver 1.0", .malformedAttestation, replacing("ver", .text("1.0"))),
            ("alg RS256", .unsupportedAlgorithm, replacing("alg", .int(-257))),
            ("x5c empty", .malformedAttestation, replacing("x5c", .array([]))),
            ("pubArea not a public area", .unsupportedAlgorithm, replacing("pubArea", .bytes(Data([0, 1, 2])))),
            ("certInfo not a statement", .malformedAttestation, replacing("certInfo", .bytes(Data([0, 1, 2])))),
            ("sig not DER", .attestationSignatureInvalid, replacing("sig", .bytes(Data([0, 1, 2])))),
        ]
        for (what, code, object) in rows {
            XCTAssertThrowsWebAuthn(code, try verify(object), what)
        }
    }
}
