import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

/// The app code beside this file — in the shapes of Apple's documentation and samples, compiled
/// in Swift 5 mode as most apps are — run against a daemon through TestEnclave.
final class AppleShapesTests: XCTestCase {
    func testTheSecureEnclaveRecipe() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let made = try makeAndStoreKey(name: "com.example.keys.signing", requiresBiometry: true)
            let key = try XCTUnwrap(loadKey(name: "com.example.keys.signing"))
            XCTAssertEqual(try exportPublicKey(of: key), try exportPublicKey(of: made))
            try enclave.queue(.match)
            let signature = try sign("pay 12.50", with: key)
            XCTAssertTrue(verify("pay 12.50", signature: signature, with: key))
            XCTAssertFalse(verify("pay 1250", signature: signature, with: key))
            let sealed = try encrypt("the new PIN is 4711", for: key)
            try enclave.queue(.match)
            XCTAssertEqual(try decrypt(sealed, with: key), "the new PIN is 4711")
            // The server's copy of the public key verifies the same signature.
            let serverCopy = try XCTUnwrap(importPublicKey(try exportPublicKey(of: key)))
            XCTAssertTrue(
                SecKeyVerifySignature(
                    serverCopy,
                    .ecdsaSignatureMessageX962SHA256,
                    Data("pay 12.50".utf8) as CFData,
                    signature as CFData,
                    nil
                )
            )
            // A refused prompt arrives as the CFError wrappers read.
            try enclave.queue(.cancel)
            XCTAssertThrowsError(try sign("again", with: key)) { error in
                let (domain, code) = describe(error)
                XCTAssertEqual(domain, NSOSStatusErrorDomain)
                XCTAssertEqual(code, Int(errSecUserCanceled))
            }
            XCTAssertEqual(removeKey(name: "com.example.keys.signing"), errSecSuccess)
            XCTAssertNil(loadKey(name: "com.example.keys.signing"))
        }
    }

    func testThePasswordItem() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            var item = PasswordItem(service: "com.example.app", account: "alice")
            XCTAssertThrowsError(try item.readPassword()) { error in
                guard case PasswordItem.KeychainError.noPassword = error else { return XCTFail("\(error)") }
            }
            try item.savePassword("first")
            try item.savePassword("second")
            XCTAssertEqual(try item.readPassword(), "second")
            try PasswordItem(service: "com.example.app", account: "bob").savePassword("bob's")
            XCTAssertEqual(
                Set(try PasswordItem.passwordItems(forService: "com.example.app").map(\.account)),
                ["alice", "bob"]
            )
            try item.renameAccount("alice2")
            XCTAssertEqual(try item.readPassword(), "second")
            try item.deleteItem()
            XCTAssertEqual(try PasswordItem.passwordItems(forService: "com.example.app").map(\.account), ["bob"])
            XCTAssertEqual(explain(errSecItemNotFound), "The specified item could not be found in the keychain.")
        }
    }

    func testTheBiometricLogin() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            XCTAssertEqual(biometryStatus(), "Touch ID")
            try addCredentials(Credentials(username: "alice", password: "hunter2"), server: server)
            try enclave.queue(.match)
            let found = try readCredentials(server: server)
            XCTAssertEqual(found.username, "alice")
            XCTAssertEqual(found.password, "hunter2")
            try enclave.queue(.cancel)
            XCTAssertThrowsError(try readCredentials(server: server)) { error in
                guard case LoginError.unhandledError(let status) = error else { return XCTFail("\(error)") }
                XCTAssertEqual(status, errSecUserCanceled)
            }
            XCTAssertEqual(deleteCredentials(server: server), errSecSuccess)

            try enclave.queue(.match)
            XCTAssertTrue(authenticateAndWait(reason: "Log in").0)
            try enclave.queue(.cancel)
            let (ok, error) = authenticateAndWait(reason: "Log in")
            XCTAssertFalse(ok)
            XCTAssertEqual((error as? LAError)?.code, .userCancel)
        }
        let empty = try TestEnclave(.with { $0.enrolled = [] })
        try empty.run { XCTAssertEqual(biometryStatus(), "not enrolled") }
    }
}
