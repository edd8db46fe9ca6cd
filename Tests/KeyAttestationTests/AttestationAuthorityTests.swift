import Crypto
import EnclaveProtocol
import Foundation
import KeyAttestation
import SwiftASN1
@_spi(FixedExpiryValidationTime) import X509
import XCTest

final class AttestationAuthorityTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_795_000_000)
    let description = KeyDescription(
        daemonMode: .system,
        sensor: .fprintd,
        simulationAllowed: false,
        keyKind: .signing,
        protection: .whenPasscodeSetThisDeviceOnly,
        accessControl: [.privateKeyUsage, .biometryCurrentSet]
    )

    private func validate(_ chain: [Data], roots: [Certificate], at time: Date) async throws -> Bool {
        let certificates = try chain.map { try Certificate(derEncoded: Array($0)) }
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy(fixedExpiryValidationTime: time)
        }
        let result = await verifier.validate(
            leaf: certificates[0],
            intermediates: CertificateStore(Array(certificates.dropFirst()))
        )
        if case .validCertificate = result { return true }
        return false
    }

    func testAKeysCertificateChainsToTheRootAndStatesTheKey() async throws {
        let authority = try AttestationAuthority.create(daemonMode: .system)
        let key = P256.Signing.PrivateKey()
        let chain = try authority.chain(for: key.publicKey, as: description)
        XCTAssertEqual(chain.count, 2)
        let valid = try await validate(chain, roots: [authority.root], at: now)
        XCTAssertTrue(valid)
        let validLater = try await validate(chain, roots: [authority.root], at: now + 20 * 365 * 86_400)
        XCTAssertTrue(validLater, "a key is attested for as long as it lives")

        let leaf = try Certificate(derEncoded: Array(chain[0]))
        XCTAssertEqual(leaf.publicKey, Certificate.PublicKey(key.publicKey))
        XCTAssertEqual(try leaf.extensions.basicConstraints, .notCertificateAuthority)
        XCTAssertTrue(leaf.subject.description.contains("OU=Authenticator Attestation"), leaf.subject.description)
        let stated = try XCTUnwrap(leaf.extensions[oid: KeyDescription.extensionID])
        XCTAssertEqual(try KeyDescription(derBytes: stated.value), description)
        let aaguid = try XCTUnwrap(leaf.extensions[oid: LaenclavedAttestation.fidoAAGUIDExtensionID])
        XCTAssertEqual(Data(try ASN1OctetString(derEncoded: aaguid.value).bytes), LaenclavedAttestation.aaguid)
        let validBefore = try await validate(
            chain,
            roots: [authority.root],
            at: Date(timeIntervalSince1970: 1_000_000_000)
        )
        XCTAssertTrue(validBefore, "a clock behind the daemon's (2001 here) changes nothing")
        XCTAssertEqual(AttestationAuthority.daemonMode(of: try Certificate(derEncoded: Array(chain[1]))), .system)
        XCTAssertEqual(
            AttestationAuthority.daemonMode(of: leaf),
            nil,
            "the mode is the attestation key's certificate's, signed by the root"
        )
        XCTAssertEqual(
            AttestationAuthority.daemonMode(of: try AttestationAuthority.create(daemonMode: .user).certificate),
            .user
        )
        XCTAssertEqual(
            try AttestationAuthority.fingerprint(of: authority.root),
            SHA256.hash(data: try XCTUnwrap(P256.Signing.PublicKey(authority.root.publicKey)).derRepresentation).map {
                String(format: "%02x", $0)
            }.joined()
        )
        // What servers see names no host or user.
        XCTAssertEqual(
            [leaf, authority.certificate, authority.root].map(\.subject.description),
            [
                "CN=laenclaved key,OU=Authenticator Attestation,O=laenclaved,C=ZZ",
                "CN=laenclaved attestation key,OU=Authenticator Attestation,O=laenclaved,C=ZZ",
                "CN=laenclaved attestation root,OU=Authenticator Attestation,O=laenclaved,C=ZZ",
            ]
        )
    }

    func testAnotherMachinesRootDoesNotValidateIt() async throws {
        let ours = try AttestationAuthority.create(daemonMode: .system)
        let theirs = try AttestationAuthority.create(daemonMode: .system)
        let chain = try theirs.chain(for: P256.Signing.PrivateKey().publicKey, as: description)
        let validUnderOurs = try await validate(chain, roots: [ours.root], at: now)
        XCTAssertFalse(validUnderOurs)
        // Nor does a chain whose attestation certificate is swapped for ours.
        let mixed = [chain[0], try AttestationAuthority.der(ours.certificate)]
        let mixedValid = try await validate(mixed, roots: [ours.root], at: now)
        XCTAssertFalse(mixedValid)
    }

    func testTheKeptAuthorityIsTheSameAuthorityAndAMismatchedKeyIsRefused() async throws {
        let authority = try AttestationAuthority.create(daemonMode: .system)
        let reloaded = try AttestationAuthority(try authority.stored)
        XCTAssertEqual(reloaded.root, authority.root)
        let chain = try reloaded.chain(for: P256.Signing.PrivateKey().publicKey, as: description)
        let valid = try await validate(chain, roots: [authority.root], at: now)
        XCTAssertTrue(valid)

        var tampered = try authority.stored
        tampered.key = P256.Signing.PrivateKey().rawRepresentation
        XCTAssertThrowsError(try AttestationAuthority(tampered))
        XCTAssertTrue(try authority.rootPEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
    }
}
