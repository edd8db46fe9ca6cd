import CryptoKit
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
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
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: protected([.privateKeyUsage, .biometryCurrentSet]))
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
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: protected([.privateKeyUsage, .biometryCurrentSet]))
            try enclave.enroll("left-thumb")
            try enclave.queue(.match)
            XCTAssertThrowsError(try key.signature(for: Data("x".utf8))) { error in
                guard case .keyInvalidated? = error as? SecureEnclaveKeyError else { return XCTFail("\(error)") }
            }
            try enclave.unenroll("left-thumb")
            XCTAssertThrowsError(try key.signature(for: Data("x".utf8)), "removing the finger again does not restore it")
            XCTAssertEqual(try enclave.status().queuedEvents, 1, "no prompt was shown for an invalidated key")
        }
    }

    func testABlobFromAnotherDaemonOrTamperedIsRefused() throws {
        let one = try TestEnclave(), two = try TestEnclave()
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
            XCTAssertThrowsError(try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: blob), "a signing key is not an agreement key")
        }
    }

    func testKeyAgreementMatchesASoftwarePeer() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let mine = try SecureEnclave.P256.KeyAgreement.PrivateKey(accessControl: protected([.privateKeyUsage, .userPresence]))
            let peer = P256.KeyAgreement.PrivateKey()
            try enclave.queue(.passcode("1234"))
            let ours = try mine.sharedSecretFromKeyAgreement(with: peer.publicKey)
            let theirs = try peer.sharedSecretFromKeyAgreement(with: mine.publicKey)
            XCTAssertEqual(ours.withUnsafeBytes { Data($0) }, theirs.withUnsafeBytes { Data($0) })
            let a = ours.hkdfDerivedSymmetricKey(using: SHA256.self, salt: Data(), sharedInfo: Data("x".utf8), outputByteCount: 32)
            let b = theirs.hkdfDerivedSymmetricKey(using: SHA256.self, salt: Data(), sharedInfo: Data("x".utf8), outputByteCount: 32)
            XCTAssertEqual(a, b)
        }
    }

    func testOneContextSignsTwiceWithOnePrompt() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let context = LAContext()
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: protected([.privateKeyUsage, .biometryAny]), authenticationContext: context)
            try enclave.queue(.match)
            _ = try key.signature(for: Data("one".utf8))
            _ = try key.signature(for: Data("two".utf8)) // nothing queued: a prompt would time out
            guard case .audit(let entries) = try enclave.send(.audit(limit: 50, everyApp: false)) else { return XCTFail() }
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
