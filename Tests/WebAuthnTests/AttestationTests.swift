import Crypto
import Foundation
import SwiftASN1
import X509
import XCTest

@testable import WebAuthn

final class AttestationTests: XCTestCase {
    let privateKey = P256.Signing.PrivateKey()
    let clientDataHash = Data(SHA256.hash(data: Data("client data".utf8)))

    var authenticatorData: AuthenticatorData {
        AuthenticatorData(
            rpID: "example.com",
            flags: [.userPresent],
            signCount: 0,
            attestedCredential: .init(
                credentialID: Data(repeating: 1, count: 16),
                publicKey: COSEKey(privateKey.publicKey)
            )
        )
    }

    func make(_ format: AttestationFormat, key: P256.Signing.PrivateKey? = nil) -> Data {
        AttestationObject.makeAttestationObject(
            authenticatorData: authenticatorData,
            format: format,
            clientDataHash: clientDataHash
        ) { message in
            try! (key ?? privateKey).signature(for: message).derRepresentation
        }
    }

    /// An attestation object with the given members, for hand-made malformations.
    func object(fmt: CBOR? = .text("packed"), attStmt: CBOR?, authData: CBOR? = nil) -> Data {
        var entries: [(key: CBOR, value: CBOR)] = []
        if let fmt { entries.append((key: .text("fmt"), value: fmt)) }
        if let attStmt { entries.append((key: .text("attStmt"), value: attStmt)) }
        entries.append((key: .text("authData"), value: authData ?? .bytes(authenticatorData.raw)))
        return CBOR.map(entries).encoded()
    }

    func packedStatement(alg: CBOR = .int(-7), sig: CBOR? = nil, extra: [(key: CBOR, value: CBOR)] = []) -> CBOR {
        let signature = try! privateKey.signature(for: authenticatorData.raw + clientDataHash).derRepresentation
        return .map([(key: .text("alg"), value: alg), (key: .text("sig"), value: sig ?? .bytes(signature))] + extra)
    }

    // MARK: Encoding

    func testNoneAttestationRoundTrips() throws {
        let encoded = make(.none)
        let decoded = try CBOR.decode(encoded)
        XCTAssertEqual(
            decoded.mapValue?.map(\.key),
            [.text("fmt"), .text("attStmt"), .text("authData")],
            "CTAP2 canonical order"
        )
        XCTAssertEqual(decoded["attStmt"], .map([]))

        let parsed = try AttestationObject(encoded)
        XCTAssertEqual(parsed.format, "none")
        XCTAssertEqual(parsed.authenticatorData.raw, authenticatorData.raw)
        XCTAssertEqual(parsed.credential.publicKey, COSEKey(privateKey.publicKey))
        XCTAssertNoThrow(try parsed.verifyStatement(clientDataHash: clientDataHash))
    }

    func testNoneDoesNotCallSigner() {
        var called = false
        _ = AttestationObject.makeAttestationObject(
            authenticatorData: authenticatorData,
            format: .none,
            clientDataHash: clientDataHash
        ) { _ in
            called = true
            return Data()
        }
        XCTAssertFalse(called)
    }

    func testPackedSelfAttestationSignsAuthDataAndClientDataHash() throws {
        var signed = Data()
        let encoded = AttestationObject.makeAttestationObject(
            authenticatorData: authenticatorData,
            format: .packed,
            clientDataHash: clientDataHash
        ) { message in
            signed = message
            return try! privateKey.signature(for: message).derRepresentation
        }
        XCTAssertEqual(signed, authenticatorData.raw + clientDataHash)
        let parsed = try AttestationObject(encoded)
        XCTAssertEqual(parsed.format, "packed")
        XCTAssertEqual(parsed.statement["alg"], .int(-7))
        XCTAssertNoThrow(try parsed.verifyStatement(clientDataHash: clientDataHash))
    }

    func testSignerErrorsPropagate() {
        struct SignerFailed: Error {}
        XCTAssertThrowsError(
            try AttestationObject.makeAttestationObject(
                authenticatorData: authenticatorData,
                format: .packed,
                clientDataHash: clientDataHash
            ) { _ in throw SignerFailed() }
        ) { XCTAssertTrue($0 is SignerFailed) }
    }

    // MARK: Verification

    func testPackedRejectsWrongSignatures() throws {
        XCTAssertThrowsWebAuthn(
            .attestationSignatureInvalid,
            try AttestationObject(make(.packed, key: P256.Signing.PrivateKey())).verifyStatement(
                clientDataHash: clientDataHash
            ),
            "signed by another key"
        )
        XCTAssertThrowsWebAuthn(
            .attestationSignatureInvalid,
            try AttestationObject(make(.packed)).verifyStatement(clientDataHash: Data(count: 32)),
            "over another client data hash"
        )
        XCTAssertThrowsWebAuthn(
            .attestationSignatureInvalid,
            try AttestationObject(object(attStmt: packedStatement(sig: .bytes(Data([0x30, 0x00])))))
                .verifyStatement(clientDataHash: clientDataHash),
            "garbage DER"
        )
    }

    func testPackedStatementShape() throws {
        XCTAssertNoThrow(
            try AttestationObject(object(attStmt: packedStatement())).verifyStatement(clientDataHash: clientDataHash)
        )
        XCTAssertThrowsWebAuthn(
            .unsupportedAlgorithm,
            try AttestationObject(object(attStmt: packedStatement(alg: .int(-257)))).verifyStatement(
                clientDataHash: clientDataHash
            )
        )
        XCTAssertThrowsWebAuthn(
            .malformedAttestation,
            try AttestationObject(object(attStmt: packedStatement(alg: .text("ES256")))).verifyStatement(
                clientDataHash: clientDataHash
            )
        )
        XCTAssertThrowsWebAuthn(
            .malformedAttestation,
            try AttestationObject(object(attStmt: packedStatement(sig: .text("sig")))).verifyStatement(
                clientDataHash: clientDataHash
            )
        )
        XCTAssertThrowsWebAuthn(
            .malformedAttestation,
            try AttestationObject(object(attStmt: packedStatement(extra: [(key: .text("extra"), value: .null)])))
                .verifyStatement(clientDataHash: clientDataHash)
        )
        XCTAssertThrowsWebAuthn(
            .malformedAttestation,
            try AttestationObject(object(attStmt: .map([]))).verifyStatement(clientDataHash: clientDataHash)
        )
    }

    func testOtherFormatsAreUnsupported() throws {
        for format in ["android-key", "android-safetynet", "fido-u2f", "apple", "compound", "None", ""] {
            XCTAssertThrowsWebAuthn(
                .unsupportedAttestationFormat,
                try AttestationObject(object(fmt: .text(format), attStmt: .map([]))).verifyStatement(
                    clientDataHash: clientDataHash
                ),
                format
            )
        }
    }

    // MARK: Packed with a certificate chain (basic attestation)

    /// An attestation certificate for `key`, shaped as §8.2.1 asks unless told otherwise.
    func certificate(
        for key: P256.Signing.PrivateKey,
        unit: String = "Authenticator Attestation",
        authority: Bool = false,
        aaguid: Data? = nil,
        signer: P256.Signing.PrivateKey? = nil
    ) throws -> Data {
        let name = try DistinguishedName {
            CountryName("ZZ")
            OrganizationName("test")
            OrganizationalUnitName(unit)
            CommonName("attestation")
        }
        var extensions = try Certificate.Extensions {
            Critical(
                authority
                    ? BasicConstraints.isCertificateAuthority(maxPathLength: nil)
                    : BasicConstraints.notCertificateAuthority
            )
        }
        if let aaguid {
            var s = DER.Serializer()
            try s.serialize(ASN1OctetString(contentBytes: ArraySlice(aaguid)))
            try extensions.append(
                Certificate.Extension(
                    oid: [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4],
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
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: .init(signer ?? key)
        )
        var s = DER.Serializer()
        try s.serialize(certificate)
        return Data(s.serializedBytes)
    }

    func basic(_ certificates: [Data], signedBy key: P256.Signing.PrivateKey) -> Data {
        AttestationObject.makeAttestationObject(
            authenticatorData: authenticatorData,
            format: .packed,
            clientDataHash: clientDataHash,
            certificates: certificates
        ) { try! key.signature(for: $0).derRepresentation }
    }

    func testBasicAttestationIsSignedByTheCertificatesKeyAndAnswersTheChain() throws {
        let attestationKey = P256.Signing.PrivateKey()
        let chain = [
            try certificate(for: attestationKey), try certificate(for: P256.Signing.PrivateKey(), authority: true),
        ]
        let encoded = basic(chain, signedBy: attestationKey)
        XCTAssertEqual(
            try CBOR.decode(encoded)["attStmt"]?.mapValue?.map(\.key),
            [.text("alg"), .text("sig"), .text("x5c")],
            "CTAP2 canonical order"
        )
        XCTAssertEqual(try AttestationObject(encoded).verifyStatement(clientDataHash: clientDataHash), chain)
        // The credential key itself may be the one certified (laenclaved's shape).
        let own = [try certificate(for: privateKey, aaguid: Data(count: 16))]
        XCTAssertEqual(
            try AttestationObject(basic(own, signedBy: privateKey)).verifyStatement(clientDataHash: clientDataHash),
            own
        )
    }

    func testBasicAttestationRefusesAnotherSignerOrAnUnfitCertificate() throws {
        let attestationKey = P256.Signing.PrivateKey()
        XCTAssertThrowsWebAuthn(
            .attestationSignatureInvalid,
            try AttestationObject(basic([try certificate(for: attestationKey)], signedBy: P256.Signing.PrivateKey()))
                .verifyStatement(clientDataHash: clientDataHash)
        )
        XCTAssertThrowsWebAuthn(
            .attestationSignatureInvalid,
            try AttestationObject(basic([try certificate(for: attestationKey)], signedBy: attestationKey))
                .verifyStatement(clientDataHash: Data(count: 32)),
            "over another client data hash"
        )
        let unfit: [(String, Data)] = [
            ("no OU", try certificate(for: attestationKey, unit: "Other")),
            ("a CA", try certificate(for: attestationKey, authority: true)),
            ("another AAGUID", try certificate(for: attestationKey, aaguid: Data(repeating: 7, count: 16))),
        ]
        for (why, der) in unfit {
            XCTAssertThrowsWebAuthn(
                .malformedAttestation,
                try AttestationObject(basic([der], signedBy: attestationKey)).verifyStatement(
                    clientDataHash: clientDataHash
                ),
                why
            )
        }
    }

    func testBasicAttestationStatementShape() throws {
        let key = P256.Signing.PrivateKey()
        let der = try certificate(for: key)
        let signature = try key.signature(for: authenticatorData.raw + clientDataHash).derRepresentation
        func statement(alg: Int = -7, x5c: CBOR) -> CBOR {
            .map([
                (key: .text("alg"), value: .int(alg)), (key: .text("sig"), value: .bytes(signature)),
                (key: .text("x5c"), value: x5c),
            ])
        }
        XCTAssertNoThrow(
            try AttestationObject(object(attStmt: statement(x5c: .array([.bytes(der)])))).verifyStatement(
                clientDataHash: clientDataHash
            )
        )
        XCTAssertThrowsWebAuthn(
            .unsupportedAlgorithm,
            try AttestationObject(object(attStmt: statement(alg: -257, x5c: .array([.bytes(der)])))).verifyStatement(
                clientDataHash: clientDataHash
            )
        )
        let malformed: [(String, CBOR)] = [
            ("empty", .array([])), ("too many", .array(Array(repeating: .bytes(der), count: 5))),
            ("not bytes", .array([.text("cert")])),
            ("not DER", .array([.bytes(Data([0x30, 0x82]))])), ("not an array", .bytes(der)),
        ]
        for (why, x5c) in malformed {
            XCTAssertThrowsWebAuthn(
                .malformedAttestation,
                try AttestationObject(object(attStmt: statement(x5c: x5c))).verifyStatement(
                    clientDataHash: clientDataHash
                ),
                why
            )
        }
    }

    func testNoneRequiresEmptyStatement() {
        XCTAssertThrowsWebAuthn(
            .malformedAttestation,
            try AttestationObject(object(fmt: .text("none"), attStmt: packedStatement())).verifyStatement(
                clientDataHash: clientDataHash
            )
        )
    }

    /// Yubikey "packed" full attestation from py_webauthn's tests: its statement is checked with the
    /// key of the certificate in its x5c (meets §8.2.1), so another client data hash fails.
    func testKnownPackedFullAttestationIsCheckedWithItsCertificate() throws {
        let yubikey = Data(
            b64u:
                "o2NmbXRmcGFja2VkZ2F0dFN0bXSjY2FsZyZjc2lnWEcwRQIhAOfrFlQpbavT6dJeTDJSCDzYSYPjBDHli2-syT2c1IiKAiAx5gQ2z5cHjdQX-jEHTb7JcjfQoVSW8fXszF5ihSgeOGN4NWOBWQLBMIICvTCCAaWgAwIBAgIEKudiYzANBgkqhkiG9w0BAQsFADAuMSwwKgYDVQQDEyNZdWJpY28gVTJGIFJvb3QgQ0EgU2VyaWFsIDQ1NzIwMDYzMTAgFw0xNDA4MDEwMDAwMDBaGA8yMDUwMDkwNDAwMDAwMFowbjELMAkGA1UEBhMCU0UxEjAQBgNVBAoMCVl1YmljbyBBQjEiMCAGA1UECwwZQXV0aGVudGljYXRvciBBdHRlc3RhdGlvbjEnMCUGA1UEAwweWXViaWNvIFUyRiBFRSBTZXJpYWwgNzE5ODA3MDc1MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEKgOGXmBD2Z4R_xCqJVRXhL8Jr45rHjsyFykhb1USGozZENOZ3cdovf5Ke8fj2rxi5tJGn_VnW4_6iQzKdIaeP6NsMGowIgYJKwYBBAGCxAoCBBUxLjMuNi4xLjQuMS40MTQ4Mi4xLjEwEwYLKwYBBAGC5RwCAQEEBAMCBDAwIQYLKwYBBAGC5RwBAQQEEgQQbUS6m_bsLkm5MAyP6SDLczAMBgNVHRMBAf8EAjAAMA0GCSqGSIb3DQEBCwUAA4IBAQByV9A83MPhFWmEkNb4DvlbUwcjc9nmRzJjKxHc3HeK7GvVkm0H4XucVDB4jeMvTke0WHb_jFUiApvpOHh5VyMx5ydwFoKKcRs5x0_WwSWL0eTZ5WbVcHkDR9pSNcA_D_5AsUKOBcbpF5nkdVRxaQHuuIuwV4k1iK2IqtMNcU8vL6w21U261xCcWwJ6sMq4zzVO8QCKCQhsoIaWrwz828GDmPzfAjFsJiLJXuYivdHACkeJ5KHMt0mjVLpfJ2BCML7_rgbmvwL7wBW80VHfNdcKmKjkLcpEiPzwcQQhiN_qHV90t-p4iyr5xRSpurlP5zic2hlRkLKxMH2_kRjhqSn4aGF1dGhEYXRhWMRJlg3liA6MaHQ0Fw9kdmBbj-SuuaKGMseZXPO6gx2XY0UAAAA0bUS6m_bsLkm5MAyP6SDLcwBAsyGQPDZRUYdb4m3rdWeyPaIMYlbmydGp1TP_33vE_lqJ3PHNyTd0iKsnKr5WjnCcBzcesZrDEfB_RBLFzU3k46UBAgMmIAEhWCBAX_i3O3DvBnkGq_uLNk_PeAX5WwO_MIxBp0mhX6Lw7yJYIOW-1-Fch829McWvRUYAHTWZTx5IycKSGECL1UzUaK_8"
        )
        let parsed = try AttestationObject(yubikey)
        XCTAssertEqual(parsed.format, "packed")
        XCTAssertEqual(parsed.credential.credentialID.count, 64)
        XCTAssertThrowsWebAuthn(
            .attestationSignatureInvalid,
            try parsed.verifyStatement(clientDataHash: Data(count: 32))
        )
        // Its certificate (Yubico's, independent of ours) meets §8.2.1 as this module checks it.
        guard case .array(let x5c)? = parsed.statement["x5c"], let der = x5c.first?.bytesValue else {
            return XCTFail("no x5c")
        }
        let yubico = try Certificate(derEncoded: Array(der))
        XCTAssertNoThrow(try AttestationObject.checkAttestationCertificate(yubico, aaguid: parsed.credential.aaguid))
        XCTAssertThrowsWebAuthn(
            .malformedAttestation,
            try AttestationObject.checkAttestationCertificate(yubico, aaguid: Data(count: 16)),
            "its AAGUID extension names its own model"
        )
    }

    // MARK: Structure

    func testRejectsMalformedObjects() {
        XCTAssertThrowsWebAuthn(.malformedAttestation, try AttestationObject(CBOR.array([]).encoded()))
        XCTAssertThrowsWebAuthn(.malformedAttestation, try AttestationObject(object(fmt: nil, attStmt: .map([]))))
        XCTAssertThrowsWebAuthn(
            .malformedAttestation,
            try AttestationObject(object(fmt: .unsigned(1), attStmt: .map([])))
        )
        XCTAssertThrowsWebAuthn(.malformedAttestation, try AttestationObject(object(attStmt: nil)))
        XCTAssertThrowsWebAuthn(.malformedAttestation, try AttestationObject(object(attStmt: .array([]))))
        XCTAssertThrowsWebAuthn(
            .malformedAttestation,
            try AttestationObject(object(attStmt: .map([]), authData: .text("x")))
        )
        XCTAssertThrowsWebAuthn(
            .malformedAttestation,
            try AttestationObject(
                CBOR.map([
                    (key: .text("fmt"), value: .text("none")), (key: .text("attStmt"), value: .map([])),
                ]).encoded()
            ),
            "no authData"
        )
    }

    func testRequiresAttestedCredentialData() {
        let withoutCredential = AuthenticatorData(rpID: "example.com", flags: [.userPresent], signCount: 0).raw
        XCTAssertThrowsWebAuthn(
            .malformedAttestation,
            try AttestationObject(object(fmt: .text("none"), attStmt: .map([]), authData: .bytes(withoutCredential)))
        )
    }

    func testPropagatesAuthenticatorDataErrors() {
        var flagged = authenticatorData.raw
        flagged[32] |= 0x80  // ED without extensions
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AttestationObject(object(fmt: .text("none"), attStmt: .map([]), authData: .bytes(flagged)))
        )
    }

    func testRejectsCBORErrors() {
        let valid = make(.none)
        XCTAssertThrowsWebAuthn(.malformedCBOR, try AttestationObject(valid.dropLast()), "truncated")
        XCTAssertThrowsWebAuthn(.malformedCBOR, try AttestationObject(valid + Data([0])), "trailing byte")
        XCTAssertThrowsWebAuthn(
            .malformedCBOR,
            try AttestationObject(Data(hex: "a263666d74646e6f6e6563666d74646e6f6e65")),
            "duplicate key"
        )
        XCTAssertThrowsWebAuthn(
            .malformedCBOR,
            try AttestationObject(Data(hex: "bf63666d74646e6f6e65ff")),
            "indefinite map"
        )
    }

    func testRejectsOversizedObjects() {
        let huge = object(attStmt: .map([(key: .text("pad"), value: .bytes(Data(count: AttestationObject.maxSize)))]))
        XCTAssertThrowsWebAuthn(.tooLarge, try AttestationObject(huge))
    }
}
