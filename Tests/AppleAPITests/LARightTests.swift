import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

/// LARight and LARightStore through the real daemon.
final class LARightTests: XCTestCase {
    func testARightAuthorizesOnceAndDeauthorizes() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            let right = LARight()
            XCTAssertEqual(right.state, .unknown)
            try await right.checkCanAuthorize()
            try enclave.queue(.match)
            try await right.authorize(localizedReason: "Open the vault")
            XCTAssertEqual(right.state, .authorized)
            await right.deauthorize()
            XCTAssertEqual(right.state, .notAuthorized)
            try enclave.queue(.cancel)
            do {
                try await right.authorize(localizedReason: "Again")
                XCTFail("cancel must fail")
            } catch let e as LAError {
                XCTAssertEqual(e.code, .userCancel)
            }
            XCTAssertEqual(right.state, .notAuthorized)
        }
    }

    func testABiometryCurrentSetRightFailsAfterAnEnrolmentChange() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            let right = LARight(requirement: .biometryCurrentSet)
            try await right.checkCanAuthorize()
            try enclave.enroll("left-thumb")
            do {
                try await right.checkCanAuthorize()
                XCTFail("the enrolment changed")
            } catch let e as LAError {
                XCTAssertEqual(e.code, .authenticationFailed)
            }
        }
    }

    func testAPersistedRightGuardsItsKeyAndSecret() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            let store = LARightStore.shared
            try await store.removeAllRights()
            _ = try await store.saveRight(
                LARight(requirement: .biometry),
                identifier: "vault",
                secret: Data("the secret".utf8)
            )
            let right = try await store.right(forIdentifier: "vault")
            // Before authorization: the public key works, the private key and the secret do not.
            let publicKey = try await right.key.publicKey.bytes
            XCTAssertEqual(publicKey.count, 65)
            do {
                _ = try await right.key.sign(Data("m".utf8), algorithm: .ecdsaSignatureMessageX962SHA256)
                XCTFail("not authorized yet")
            } catch {}
            do {
                _ = try await right.secret.rawData
                XCTFail("not authorized yet")
            } catch {}

            try enclave.queue(.match)
            try await right.authorize(localizedReason: "Open the vault")
            // One prompt: the key and the secret ride on the right's authorization (nothing queued).
            let signature = try await right.key.sign(Data("message".utf8), algorithm: .ecdsaSignatureMessageX962SHA256)
            try await right.key.publicKey.verify(
                Data("message".utf8),
                signature: signature,
                algorithm: .ecdsaSignatureMessageX962SHA256
            )
            do {
                try await right.key.publicKey.verify(
                    Data("other".utf8),
                    signature: signature,
                    algorithm: .ecdsaSignatureMessageX962SHA256
                )
                XCTFail("a wrong message must not verify")
            } catch {}
            let secret = try await right.secret.rawData
            XCTAssertEqual(secret, Data("the secret".utf8))

            try await store.removeRight(forIdentifier: "vault")
            do {
                _ = try await store.right(forIdentifier: "vault")
                XCTFail("removed")
            } catch let e as LARightStoreError {
                XCTAssertEqual(e, .notFound("vault"))
            }
        }
    }

    /// A right's key decrypts what its public key encrypted (ECIES, Apple's framing) and agrees
    /// with another key — the rights API's key operations beside signing, through the daemon. It
    /// refused both before ("a right's key decrypts nothing on Linux yet").
    func testAPersistedRightsKeyDecryptsAndExchanges() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            let store = LARightStore.shared
            try await store.removeAllRights()
            let right = try await store.saveRight(LARight(), identifier: "mailbox")
            let algorithm = SecKeyAlgorithm.eciesEncryptionCofactorVariableIVX963SHA256AESGCM
            XCTAssertTrue(right.key.publicKey.canEncrypt(using: algorithm))
            XCTAssertTrue(right.key.canDecrypt(using: algorithm))
            let sealed = try await right.key.publicKey.encrypt(Data("a letter".utf8), algorithm: algorithm)
            try enclave.queue(.match)
            try await right.authorize(localizedReason: "Read the letter")
            let opened = try await right.key.decrypt(sealed, algorithm: algorithm)
            XCTAssertEqual(opened, Data("a letter".utf8))

            let other = SecKeyCreateRandomKey(
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256] as CFDictionary,
                nil
            )!
            let otherPublic = SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(other)!, nil)! as Data
            let parameters: [AnyHashable: Any] = [kSecKeyKeyExchangeParameterRequestedSize as String: 16]
            let ours = try await right.key.exchangeKeys(
                publicKey: otherPublic,
                algorithm: .ecdhKeyExchangeStandardX963SHA256,
                parameters: parameters
            )
            let rightPublic = SecKeyCreateWithData(
                try await right.key.publicKey.bytes as CFData,
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic]
                    as CFDictionary,
                nil
            )!
            let theirs =
                SecKeyCopyKeyExchangeResult(
                    other,
                    .ecdhKeyExchangeStandardX963SHA256,
                    rightPublic,
                    parameters as NSDictionary,
                    nil
                ) as Data?
            XCTAssertEqual(ours, theirs)
            XCTAssertEqual(ours.count, 16)
            // Parameters keyed as Swift code writes them (the typed name's raw value) work too.
            let typed: [AnyHashable: Any] = [SecKeyKeyExchangeParameter.requestedSize.rawValue: 16]
            let again = try await right.key.exchangeKeys(
                publicKey: otherPublic,
                algorithm: .ecdhKeyExchangeStandardX963SHA256,
                parameters: typed
            )
            XCTAssertEqual(again, ours)

            // After deauthorize and authorize the key uses the right's new context (it kept the
            // invalidated one before).
            await right.deauthorize()
            try enclave.queue(.match)
            try await right.authorize(localizedReason: "Read it again")
            let reopened = try await right.key.decrypt(sealed, algorithm: algorithm)
            XCTAssertEqual(reopened, Data("a letter".utf8))
        }
    }

    /// The completion-handler twins Apple's rights API has beside its async forms, and a missing
    /// right as the keychain's NSError.
    func testCompletionHandlerForms() throws {
        let enclave = try TestEnclave()
        enclave.run {
            let saved = expectation(description: "saved")
            LARightStore.shared.saveRight(LARight(), identifier: "twin") { right, error in
                XCTAssertNotNil(right)
                XCTAssertNil(error)
                saved.fulfill()
            }
            wait(for: [saved], timeout: 10)
            let missing = expectation(description: "missing")
            LARightStore.shared.right(forIdentifier: "no-such-right") { right, error in
                XCTAssertNil(right)
                let ns = error.map { $0 as NSError }
                XCTAssertEqual(ns?.domain, NSOSStatusErrorDomain)
                XCTAssertEqual(ns?.code, Int(errSecItemNotFound))
                missing.fulfill()
            }
            let checked = expectation(description: "checked")
            LARight().checkCanAuthorize { error in
                XCTAssertNil(error)
                checked.fulfill()
            }
            let removed = expectation(description: "removed")
            LARightStore.shared.removeAllRights { error in
                XCTAssertNil(error)
                removed.fulfill()
            }
            wait(for: [missing, checked, removed], timeout: 10)
        }
    }
}
