import Crypto
import Foundation
import SwiftASN1
import TPMWire
import TouchLoginAPI
import WebAuthn
import X509
import XCTest

@testable import TouchLoginServer

/// The attestation-key CA in-process, with a software stand-in for the TPM and its maker: the
/// endorsement key and attestation key marshalled as a TPM does, the maker's certificate made
/// here. Activation itself needs a TPM (TouchLoginTPMAttestationTests); here the secret is read
/// from the authority to test what it issues.
final class TPMAttestationKeyAuthorityTests: XCTestCase {
    let makerKey = P256.Signing.PrivateKey()
    let endorsement = P256.KeyAgreement.PrivateKey()
    let attestation = P256.Signing.PrivateKey()
    let description = TPMDescription(manufacturer: "id:49424D00", model: "swtpm", version: "id:20191023")
    let now = 1_900_000_000.0

    static let endorsementAttributes: TPMPublicArea.Attributes = [
        .fixedTPM, .fixedParent, .sensitiveDataOrigin, .adminWithPolicy, .restricted, .decrypt,
    ]
    static let attestationAttributes: TPMPublicArea.Attributes = [
        .fixedTPM, .fixedParent, .sensitiveDataOrigin, .userWithAuth, .restricted, .sign,
    ]

    static func area(_ x963: Data, attributes: TPMPublicArea.Attributes, endorsement: Bool) -> Data {
        Data(TPMStandIn.publicArea(x963: x963, attributes: attributes, endorsement: endorsement))
    }

    var makerName: DistinguishedName { try! DistinguishedName { CommonName("test TPM maker") } }

    func makerRoot(_ key: P256.Signing.PrivateKey) throws -> Certificate {
        try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: Date(timeIntervalSince1970: now - 86_400),
            notValidAfter: Date(timeIntervalSince1970: now + 86_400 * 365),
            issuer: makerName,
            subject: makerName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(key)
        )
    }

    /// The maker's certificate of an endorsement key.
    func endorsementCertificate(for key: P256.KeyAgreement.PublicKey, naming: Bool = true) throws -> Data {
        var extensions = try Certificate.Extensions { Critical(BasicConstraints.notCertificateAuthority) }
        if naming { try extensions.append(description.subjectAlternativeName()) }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(try P256.Signing.PublicKey(x963Representation: key.x963Representation)),
            notValidBefore: Date(timeIntervalSince1970: now - 3600),
            notValidAfter: Date(timeIntervalSince1970: now + 86_400 * 365),
            issuer: makerName,
            subject: DistinguishedName(),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: .init(makerKey)
        )
        var der = DER.Serializer()
        try der.serialize(certificate)
        return Data(der.serializedBytes)
    }

    func presented(
        endorsementKey: Data? = nil,
        certificate: Data? = nil,
        attestationKey: Data? = nil
    ) throws -> TPMAttestationKeyChallengeRequest {
        TPMAttestationKeyChallengeRequest(
            endorsementKey: (endorsementKey
                ?? Self.area(
                    endorsement.publicKey.x963Representation,
                    attributes: Self.endorsementAttributes,
                    endorsement: true
                ))
                .base64URLEncodedString(),
            endorsementCertificate: try (certificate ?? endorsementCertificate(for: endorsement.publicKey))
                .base64URLEncodedString(),
            attestationKey: (attestationKey
                ?? Self.area(
                    attestation.publicKey.x963Representation,
                    attributes: Self.attestationAttributes,
                    endorsement: false
                ))
                .base64URLEncodedString()
        )
    }

    func authority(
        secret: SymmetricKey = SymmetricKey(data: Data(repeating: 5, count: 32))
    ) throws -> TPMAttestationKeyAuthority {
        try TPMAttestationKeyAuthority(makerRoots: [try makerRoot(makerKey)], secret: secret)
    }

    /// The answer only the TPM could give: the secret the authority wrapped.
    func answer(
        _ challenge: TPMAttestationKeyChallengeResponse,
        _ request: TPMAttestationKeyChallengeRequest,
        by authority: TPMAttestationKeyAuthority
    ) async throws -> TPMAttestationKeyCertificateRequest {
        let token = try XCTUnwrap(Data(base64URLEncoded: challenge.token))
        let secret = authority.secret(
            token: token.prefix(TPMAttestationKeyAuthority.tokenSize - 32),
            try await authority.presented(request, now: now)
        )
        return TPMAttestationKeyCertificateRequest(
            key: request,
            token: challenge.token,
            secret: secret.base64URLEncodedString()
        )
    }

    func testTheAikCertItIssuesMeetsWebAuthnsRulesAndChainsToItsRootOnly() async throws {
        let authority = try authority()
        XCTAssertEqual(
            try self.authority().root.publicKey,
            authority.root.publicKey,
            "the CA is the deployment secret's"
        )
        let request = try presented()
        let challenge = try await authority.challenge(request, now: now)
        let issued = try await authority.certificate(try await answer(challenge, request, by: authority), now: now)
        let der = try XCTUnwrap(Data(base64URLEncoded: issued.certificate))
        let certificate = try Certificate(derEncoded: Array(der))
        XCTAssertTrue(certificate.subject.isEmpty)
        XCTAssertEqual(try TPMDescription(certificate), description, "the maker's words, copied")
        XCTAssertEqual(certificate.publicKey, Certificate.PublicKey(attestation.publicKey))
        XCTAssertEqual(try certificate.extensions.basicConstraints, .notCertificateAuthority)
        XCTAssertTrue(
            try XCTUnwrap(certificate.extensions.extendedKeyUsage).contains(
                .init(oid: TPMDescription.attestationKeyPurpose)
            )
        )
        XCTAssertEqual(try Certificate(pemEncoded: issued.root).publicKey, authority.root.publicKey)

        let checked = try await authority.check([der], now: now + 60)
        XCTAssertEqual(checked, description)
        for (what, checker, at) in [
            ("another deployment's CA", try self.authority(secret: SymmetricKey(size: .bits256)), now + 60),
            ("expired", authority, now + TPMAttestationKeyAuthority.certificateLifetime + 1),
        ] {
            do {
                _ = try await checker.check([der], now: at)
                XCTFail(what)
            } catch let error as APIError {
                XCTAssertEqual(error.code, APIError.Code.attestationUntrusted.rawValue, what)
            }
        }
    }

    func testWhatIsPresentedIsCheckedBeforeAnythingIsWrapped() async throws {
        let stranger = P256.Signing.PrivateKey()
        let otherEndorsement = P256.KeyAgreement.PrivateKey()
        let signingEK = Self.area(
            endorsement.publicKey.x963Representation,
            attributes: Self.attestationAttributes,
            endorsement: true
        )
        let unrestrictedAK = Self.area(
            attestation.publicKey.x963Representation,
            attributes: Self.attestationAttributes.subtracting(.restricted),
            endorsement: false
        )
        let decryptingAK = Self.area(
            attestation.publicKey.x963Representation,
            attributes: Self.attestationAttributes.union(.decrypt),
            endorsement: false
        )
        let otherMaker = try makerRoot(stranger)  // the same name, another key
        let strangerAuthority = try TPMAttestationKeyAuthority(
            makerRoots: [otherMaker],
            secret: SymmetricKey(size: .bits256)
        )
        let rows: [(String, TPMAttestationKeyAuthority, TPMAttestationKeyChallengeRequest, APIError.Code)] = [
            ("a maker this server does not trust", strangerAuthority, try presented(), .attestationUntrusted),
            (
                "a certificate of another endorsement key", try authority(),
                try presented(certificate: endorsementCertificate(for: otherEndorsement.publicKey)),
                .attestationUntrusted
            ),
            (
                "a certificate that names no TPM", try authority(),
                try presented(certificate: endorsementCertificate(for: endorsement.publicKey, naming: false)),
                .attestationUntrusted
            ),
            (
                "an endorsement key that signs", try authority(), try presented(endorsementKey: signingEK),
                .attestationUntrusted
            ),
            (
                "an attestation key that signs anything", try authority(),
                try presented(attestationKey: unrestrictedAK), .attestationUntrusted
            ),
            (
                "an attestation key that decrypts", try authority(), try presented(attestationKey: decryptingAK),
                .attestationUntrusted
            ),
            ("not a public area", try authority(), try presented(attestationKey: Data([1, 2, 3])), .malformedRequest),
            (
                "not base64url", try authority(),
                TPMAttestationKeyChallengeRequest(
                    endorsementKey: "***",
                    endorsementCertificate: "",
                    attestationKey: ""
                ), .malformedRequest
            ),
        ]
        for (what, authority, request, code) in rows {
            do {
                _ = try await authority.challenge(request, now: now)
                XCTFail(what)
            } catch let error as APIError {
                XCTAssertEqual(error.code, code.rawValue, "\(what): \(error)")
            }
        }
    }

    func testATokenIsThisDeploymentsAndExpires() async throws {
        let authority = try authority()
        let request = try presented()
        let challenge = try await authority.challenge(request, now: now)
        let answered = try await answer(challenge, request, by: authority)
        var tampered = answered
        var token = try XCTUnwrap(Data(base64URLEncoded: answered.token))
        token[3] ^= 1
        tampered.token = token.base64URLEncodedString()
        let rows: [(String, TPMAttestationKeyAuthority, TPMAttestationKeyCertificateRequest, Double, APIError.Code)] = [
            (
                "another deployment", try self.authority(secret: SymmetricKey(size: .bits256)), answered, now,
                .challengeUnknown
            ),
            ("a changed token", authority, tampered, now, .challengeUnknown),
            (
                "too late", authority, answered, now + TPMAttestationKeyAuthority.challengeLifetime + 1,
                .challengeExpired
            ),
        ]
        for (what, authority, request, at, code) in rows {
            do {
                _ = try await authority.certificate(request, now: at)
                XCTFail(what)
            } catch let error as APIError {
                XCTAssertEqual(error.code, code.rawValue, "\(what): \(error)")
            }
        }
    }
}
