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
            _ = try await store.saveRight(LARight(requirement: .biometry), identifier: "vault", secret: Data("the secret".utf8))
            let right = try await store.right(forIdentifier: "vault")
            // Before authorization: the public key works, the private key and the secret do not.
            let publicKey = try await right.key.publicKey.bytes
            XCTAssertEqual(publicKey.count, 65)
            do { _ = try await right.key.sign(Data("m".utf8), algorithm: .ecdsaSignatureMessageX962SHA256); XCTFail("not authorized yet") } catch {}
            do { _ = try await right.secret.rawData; XCTFail("not authorized yet") } catch {}

            try enclave.queue(.match)
            try await right.authorize(localizedReason: "Open the vault")
            // One prompt: the key and the secret ride on the right's authorization (nothing queued).
            let signature = try await right.key.sign(Data("message".utf8), algorithm: .ecdsaSignatureMessageX962SHA256)
            try await right.key.publicKey.verify(Data("message".utf8), signature: signature, algorithm: .ecdsaSignatureMessageX962SHA256)
            do {
                try await right.key.publicKey.verify(Data("other".utf8), signature: signature, algorithm: .ecdsaSignatureMessageX962SHA256)
                XCTFail("a wrong message must not verify")
            } catch {}
            let secret = try await right.secret.rawData
            XCTAssertEqual(secret, Data("the secret".utf8))

            try await store.removeRight(forIdentifier: "vault")
            do { _ = try await store.right(forIdentifier: "vault"); XCTFail("removed") } catch let e as LARightStoreError {
                XCTAssertEqual(e, .notFound("vault"))
            }
        }
    }
}
