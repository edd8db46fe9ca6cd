import Crypto
import Foundation
import SwiftASN1
import TPMWire
import TouchLoginAPI
import TouchLoginTestSupport
import WebAuthn
import X509
import XCTest

@testable import TouchLoginServer

/// The attestation-key CA in-process, with a software stand-in for the TPM and its maker
/// (`StandInTPM`). Activation itself needs a TPM (TouchLoginTPMAttestationTests); here the secret
/// is read from the authority to test what it issues.
final class TPMAttestationKeyAuthorityTests: XCTestCase {
    let now = 1_900_000_000.0
    lazy var tpm = StandInTPM(now: now)

    func authority(
        secret: SymmetricKey = SymmetricKey(data: Data(repeating: 5, count: 32))
    ) throws -> TPMAttestationKeyAuthority {
        try TPMAttestationKeyAuthority(makerRoots: [try tpm.makerRoot()], secret: secret)
    }

    func area(_ x963: Data, _ attributes: TPMPublicArea.Attributes, endorsement: Bool = false) -> Data {
        StandInTPM.area(x963, attributes: attributes, endorsement: endorsement)
    }

    func testTheAikCertItIssuesMeetsWebAuthnsRulesAndChainsToItsRootOnly() async throws {
        let authority = try authority()
        XCTAssertEqual(
            try self.authority().root.publicKey,
            authority.root.publicKey,
            "the CA is the deployment secret's"
        )
        let request = try tpm.presented()
        let challenge = try await authority.challenge(request, now: now)
        let issued = try await authority.certificate(try await tpm.answer(challenge, request, by: authority), now: now)
        let der = try XCTUnwrap(Data(base64URLEncoded: issued.certificate))
        let certificate = try Certificate(derEncoded: Array(der))
        XCTAssertTrue(certificate.subject.isEmpty)
        XCTAssertEqual(try TPMDescription(certificate), tpm.description, "the maker's words, copied")
        XCTAssertEqual(certificate.publicKey, Certificate.PublicKey(tpm.attestation.publicKey))
        XCTAssertEqual(try certificate.extensions.basicConstraints, .notCertificateAuthority)
        XCTAssertTrue(
            try XCTUnwrap(certificate.extensions.extendedKeyUsage).contains(
                .init(oid: TPMDescription.attestationKeyPurpose)
            )
        )
        XCTAssertEqual(try Certificate(pemEncoded: issued.root).publicKey, authority.root.publicKey)

        let checked = try await authority.check([der], now: now + 60)
        XCTAssertEqual(checked, tpm.description)
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
        let endorsement = tpm.endorsement.publicKey.x963Representation
        let attestation = tpm.attestation.publicKey.x963Representation
        let strangerAuthority = try TPMAttestationKeyAuthority(
            makerRoots: [try tpm.makerRoot(P256.Signing.PrivateKey())],  // the same name, another key
            secret: SymmetricKey(size: .bits256)
        )
        let clientAuth: ASN1ObjectIdentifier = [1, 3, 6, 1, 5, 5, 7, 3, 2]
        let rows: [(String, TPMAttestationKeyAuthority, TPMAttestationKeyChallengeRequest, APIError.Code)] = [
            ("a maker this server does not trust", strangerAuthority, try tpm.presented(), .attestationUntrusted),
            (
                "a certificate of another endorsement key", try authority(),
                try tpm.presented(
                    certificate: tpm.endorsementCertificate(for: P256.KeyAgreement.PrivateKey().publicKey)
                ),
                .attestationUntrusted
            ),
            (
                "a certificate that names no TPM", try authority(),
                try tpm.presented(certificate: tpm.endorsementCertificate(naming: false)), .attestationUntrusted
            ),
            (
                "a CA's certificate", try authority(),
                try tpm.presented(certificate: tpm.endorsementCertificate(authority: true)), .attestationUntrusted
            ),
            (
                "a certificate for another purpose", try authority(),
                try tpm.presented(certificate: tpm.endorsementCertificate(purpose: clientAuth)), .attestationUntrusted
            ),
            (
                "an endorsement key that signs", try authority(),
                try tpm.presented(
                    endorsementKey: area(endorsement, StandInTPM.attestationAttributes, endorsement: true)
                ),
                .attestationUntrusted
            ),
            (
                "an attestation key that signs anything", try authority(),
                try tpm.presented(
                    attestationKey: area(attestation, StandInTPM.attestationAttributes.subtracting(.restricted))
                ),
                .attestationUntrusted
            ),
            (
                "an attestation key that decrypts", try authority(),
                try tpm.presented(attestationKey: area(attestation, StandInTPM.attestationAttributes.union(.decrypt))),
                .attestationUntrusted
            ),
            (
                "not a public area", try authority(), try tpm.presented(attestationKey: Data([1, 2, 3])),
                .malformedRequest
            ),
            (
                "not base64url", try authority(),
                TPMAttestationKeyChallengeRequest(
                    endorsementKey: "***",
                    endorsementCertificate: "",
                    attestationKey: ""
                ),
                .malformedRequest
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

    /// The token is this deployment's and expires; the secret is the one wrapped for this token and
    /// these keys (a guess, or the answer offered for another attestation key, certifies nothing).
    func testATokenIsThisDeploymentsAndExpiresAndTheSecretIsItsOwn() async throws {
        let authority = try authority()
        let request = try tpm.presented()
        let challenge = try await authority.challenge(request, now: now)
        let answered = try await tpm.answer(challenge, request, by: authority)
        var tampered = answered
        var token = try XCTUnwrap(Data(base64URLEncoded: answered.token))
        token[3] ^= 1
        tampered.token = token.base64URLEncodedString()
        var guessed = answered
        guessed.secret = Data(count: 32).base64URLEncodedString()
        var swapped = answered
        swapped.key = try tpm.presented(
            attestationKey: area(
                P256.Signing.PrivateKey().publicKey.x963Representation,
                StandInTPM.attestationAttributes
            )
        )
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
            ("a guessed secret", authority, guessed, now, .attestationUntrusted),
            ("the secret offered for another attestation key", authority, swapped, now, .attestationUntrusted),
        ]
        for (what, authority, request, at, code) in rows {
            do {
                _ = try await authority.certificate(request, now: at)
                XCTFail(what)
            } catch let error as APIError {
                XCTAssertEqual(error.code, code.rawValue, "\(what): \(error)")
            }
        }
        _ = try await authority.certificate(answered, now: now)
    }
}
