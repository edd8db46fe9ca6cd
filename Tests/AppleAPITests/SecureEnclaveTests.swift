import CryptoKit
import EnclaveProtocol
import Foundation
import IntegrationSupport
import KeyAttestation
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import X509
import XCTest

/// SecureEnclave keys, through the real daemon: the private key stays there; every use follows
/// the key's access control.
final class SecureEnclaveTests: XCTestCase {
    private func protected(_ flags: SecAccessControlCreateFlags) -> SecAccessControl {
        SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, flags, nil)!
    }

    func testSigningNeedsTheOwnerAndVerifiesWithThePublicKey() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            XCTAssertTrue(SecureEnclave.isAvailable)
            let key = try SecureEnclave.P256.Signing.PrivateKey(
                accessControl: protected([.privateKeyUsage, .biometryCurrentSet])
            )
            let message = Data("challenge-123".utf8)
            try enclave.queue(.match)
            let signature = try key.signature(for: message)
            XCTAssertTrue(key.publicKey.isValidSignature(signature, for: message))
            XCTAssertFalse(key.publicKey.isValidSignature(signature, for: Data("other".utf8)))
            // The blob restores the same key; it contains no private key in clear.
            let restored = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation)
            XCTAssertEqual(restored.publicKey.rawRepresentation, key.publicKey.rawRepresentation)
            try enclave.queue(.cancel)
            XCTAssertThrowsError(try restored.signature(for: message)) { error in
                XCTAssertEqual((error as? LAError)?.code, .userCancel)
            }
        }
    }

    func testAnEnrolmentChangeInvalidatesACurrentSetKeyForever() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let key = try SecureEnclave.P256.Signing.PrivateKey(
                accessControl: protected([.privateKeyUsage, .biometryCurrentSet])
            )
            try enclave.enroll("left-thumb")
            try enclave.queue(.match)
            XCTAssertThrowsError(try key.signature(for: Data("x".utf8))) { error in
                guard case .keyInvalidated? = error as? SecureEnclaveKeyError else { return XCTFail("\(error)") }
            }
            try enclave.unenroll("left-thumb")
            XCTAssertThrowsError(
                try key.signature(for: Data("x".utf8)),
                "removing the finger again does not restore it"
            )
            XCTAssertEqual(try enclave.status().queuedEvents, 1, "no prompt was shown for an invalidated key")
        }
    }

    func testABlobFromAnotherDaemonOrTamperedIsRefused() throws {
        let one = try TestEnclave()
        let two = try TestEnclave()
        let blob = try one.run { try SecureEnclave.P256.Signing.PrivateKey().dataRepresentation }
        try two.run {
            XCTAssertThrowsError(try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: blob)) { error in
                guard case .invalidKey? = error as? SecureEnclaveKeyError else { return XCTFail("\(error)") }
            }
        }
        var tampered = blob
        tampered[tampered.count - 1] ^= 0x01
        try one.run {
            XCTAssertThrowsError(try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: tampered))
            XCTAssertThrowsError(
                try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: blob),
                "a signing key is not an agreement key"
            )
        }
    }

    /// Whether `chain` leads to `root` now, as a server checks it.
    private func chains(_ chain: [Data], to root: Data) async throws -> Bool {
        let certificates = try chain.map { try Certificate(derEncoded: Array($0)) }
        var verifier = Verifier(rootCertificates: CertificateStore([try Certificate(derEncoded: Array(root))])) {
            RFC5280Policy()
        }
        if case .validCertificate = await verifier.validate(
            leaf: certificates[0],
            intermediates: CertificateStore(Array(certificates.dropFirst()))
        ) {
            return true
        }
        return false
    }

    func testAKeysAttestationCertifiesItsPublicKeyAndStatesItsAccessControl() async throws {
        let enclave = try TestEnclave()
        let other = try TestEnclave()
        let otherRoot = try other.run { try SecureEnclave.attestationRoot() }
        let (key, chain, root) = try enclave.run {
            let key = try SecureEnclave.P256.Signing.PrivateKey(
                accessControl: protected([.privateKeyUsage, .biometryCurrentSet])
            )
            return (key, try key.attestationCertificates(), try SecureEnclave.attestationRoot())
        }
        XCTAssertEqual(try enclave.status().queuedEvents, 0)
        let leaf = try Certificate(derEncoded: Array(chain[0]))
        XCTAssertEqual(leaf.publicKey, Certificate.PublicKey(key.publicKey))
        let stated = try KeyDescription(derBytes: try XCTUnwrap(leaf.extensions[oid: KeyDescription.extensionID]).value)
        XCTAssertEqual(
            stated,
            KeyDescription(
                daemonMode: .user,
                sensor: .simulated,
                simulationAllowed: true,
                keyKind: .signing,
                protection: .whenPasscodeSetThisDeviceOnly,
                accessControl: [.privateKeyUsage, .biometryCurrentSet]
            )
        )
        let trusted = try await chains(chain, to: root)
        XCTAssertTrue(trusted)
        let trustedElsewhere = try await chains(chain, to: otherRoot)
        XCTAssertFalse(trustedElsewhere, "another daemon's root does not vouch for this daemon's keys")

        // The root is made once per state: a restarted daemon still chains to it.
        try enclave.restart()
        let (again, rootAgain) = try enclave.run {
            (try key.attestationCertificates(), try SecureEnclave.attestationRoot())
        }
        XCTAssertEqual(rootAgain, root)
        let trustedAgain = try await chains(again, to: root)
        XCTAssertTrue(trustedAgain)
    }

    func testAKeyThatCanNeverBeUsedAgainOrIsNotOursIsNotAttested() throws {
        let enclave = try TestEnclave()
        let other = try TestEnclave()
        try enclave.run {
            let key = try SecureEnclave.P256.Signing.PrivateKey(
                accessControl: protected([.privateKeyUsage, .biometryCurrentSet])
            )
            try enclave.enroll("left-thumb")
            XCTAssertThrowsError(try key.attestationCertificates()) { error in
                guard case .keyInvalidated? = error as? SecureEnclaveKeyError else { return XCTFail("\(error)") }
            }
        }
        let blob = try other.run { try SecureEnclave.P256.Signing.PrivateKey().dataRepresentation }
        try enclave.run {
            XCTAssertThrowsError(
                try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: blob).attestationCertificates()
            ) { error in
                guard case .invalidKey? = error as? SecureEnclaveKeyError else { return XCTFail("\(error)") }
            }
        }
    }

    func testKeyAgreementMatchesASoftwarePeer() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let mine = try SecureEnclave.P256.KeyAgreement.PrivateKey(
                accessControl: protected([.privateKeyUsage, .userPresence])
            )
            let peer = P256.KeyAgreement.PrivateKey()
            try enclave.queue(.passcode("1234"))
            let ours = try mine.sharedSecretFromKeyAgreement(with: peer.publicKey)
            let theirs = try peer.sharedSecretFromKeyAgreement(with: mine.publicKey)
            XCTAssertEqual(ours.withUnsafeBytes { Data($0) }, theirs.withUnsafeBytes { Data($0) })
            let a = ours.hkdfDerivedSymmetricKey(
                using: SHA256.self,
                salt: Data(),
                sharedInfo: Data("x".utf8),
                outputByteCount: 32
            )
            let b = theirs.hkdfDerivedSymmetricKey(
                using: SHA256.self,
                salt: Data(),
                sharedInfo: Data("x".utf8),
                outputByteCount: 32
            )
            XCTAssertEqual(a, b)
        }
    }

    func testOneContextSignsTwiceWithOnePrompt() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let context = LAContext()
            let key = try SecureEnclave.P256.Signing.PrivateKey(
                accessControl: protected([.privateKeyUsage, .biometryAny]),
                authenticationContext: context
            )
            try enclave.queue(.match)
            _ = try key.signature(for: Data("one".utf8))
            _ = try key.signature(for: Data("two".utf8))  // nothing queued: a prompt would time out
            guard case .audit(let entries) = try enclave.send(.audit(.init(limit: 50, everyApp: false))) else {
                return XCTFail()
            }
            let steps = entries.filter { $0.operation == "key.authorize" }.map(\.result)
            XCTAssertEqual(steps.sorted(), ["success(biometric)", "success(contextAuthorized)"])
        }
    }

    func testAKeyWithoutConstraintsSignsWithoutAPrompt() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let key = try SecureEnclave.P256.Signing.PrivateKey()
            let signature = try key.signature(for: SHA256.hash(data: Data("hello".utf8)))
            XCTAssertTrue(key.publicKey.isValidSignature(signature, for: Data("hello".utf8)))
        }
    }
}
