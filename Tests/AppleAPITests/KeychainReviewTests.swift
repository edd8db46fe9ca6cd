import CryptoKit
import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

/// Regressions for the defects a security review of the keychain and keys found.
final class KeychainReviewTests: XCTestCase {
    func testAReplyOverTheMessageLimitIsAnErrorNotACrash() throws {
        let enclave = try TestEnclave()
        enclave.run {
            let big = Data(repeating: 0x41, count: 4096)
            for i in 0..<20 {
                XCTAssertEqual(
                    SecItemAdd(
                        [
                            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "big\(i)",
                            kSecAttrGeneric as String: big, kSecValueData as String: Data(),
                        ] as CFDictionary,
                        nil
                    ),
                    errSecSuccess
                )
            }
            var all: CFTypeRef?
            let status = SecItemCopyMatching(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll,
                    kSecReturnAttributes as String: true,
                ] as CFDictionary,
                &all
            )
            XCTAssertNotEqual(status, errSecSuccess, "80 KiB of attributes cannot travel in one answer")
            var five: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: 5,
                        kSecReturnAttributes as String: true,
                    ] as CFDictionary,
                    &five
                ),
                errSecSuccess
            )
            XCTAssertEqual((five as? [Any])?.count, 5)
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "huge",
                        kSecAttrGeneric as String: Data(repeating: 1, count: 5000),
                    ] as CFDictionary,
                    nil
                ),
                errSecParam
            )
        }
        XCTAssertTrue(try enclave.status().passcodeSet, "the daemon is alive")
    }

    func testAnUpdateWithoutTheApplicationPasswordCannotStripIt() throws {
        let enclave = try TestEnclave()
        enclave.run {
            let access = SecAccessControlCreateWithFlags(
                nil,
                kSecAttrAccessibleWhenUnlocked,
                .applicationPassword,
                nil
            )!
            let owner = LAContext()
            owner.setCredential(Data("pw".utf8), type: .applicationPassword)
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
                        kSecAttrAccessControl as String: access, kSecUseAuthenticationContext as String: owner,
                        kSecValueData as String: Data("old".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
            XCTAssertEqual(
                SecItemUpdate(
                    [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded"]
                        as CFDictionary,
                    [kSecValueData as String: Data("new".utf8)] as CFDictionary
                ),
                errSecAuthFailed
            )
            var item: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
                        kSecReturnData as String: true,
                    ] as CFDictionary,
                    &item
                ),
                errSecAuthFailed,
                "still needs its password"
            )
            XCTAssertEqual(
                SecItemUpdate(
                    [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded"]
                        as CFDictionary,
                    [kSecAttrAccessible as String: kSecAttrAccessibleAlways] as CFDictionary
                ),
                errSecAuthFailed
            )
            XCTAssertEqual(
                SecItemUpdate(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
                        kSecUseAuthenticationContext as String: owner,
                    ] as CFDictionary,
                    ["mdat": Date()] as CFDictionary
                ),
                errSecParam,
                "modification dates are the keychain's"
            )
        }
    }

    func testAnEnrolmentChangeDuringAnOpenPromptInvalidatesTheRead() async throws {
        let enclave = try TestEnclave()
        enclave.run {
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .biometryCurrentSet, nil)!
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "current",
                        kSecAttrAccessControl as String: access, kSecValueData as String: Data("v".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        let endpoint = enclave.endpoint
        let read = Task.detached { () -> OSStatus in
            EnclaveEndpoint.$override.withValue(endpoint) {
                var item: CFTypeRef?
                return SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "current",
                        kSecReturnData as String: true,
                    ] as CFDictionary,
                    &item
                )
            }
        }
        try eventually("the prompt to open") { try enclave.status().promptOpen }
        try enclave.enroll("intruder-finger")
        try enclave.queue(.match)
        let status = await read.value
        XCTAssertEqual(status, errSecInvalidItemRef)
    }

    func testCurrentSetOrPasscodeStaysReadableWithThePasscodeAfterAnEnrolmentChange() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let access = SecAccessControlCreateWithFlags(
                nil,
                kSecAttrAccessibleWhenUnlocked,
                [.biometryCurrentSet, .or, .devicePasscode],
                nil
            )!
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "either",
                        kSecAttrAccessControl as String: access, kSecValueData as String: Data("v".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
            try enclave.enroll("left-thumb")
            try enclave.queue(.match, .passcode("1234"))
            var item: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "either",
                        kSecReturnData as String: true,
                    ] as CFDictionary,
                    &item
                ),
                errSecSuccess
            )
            XCTAssertEqual(item as? Data, Data("v".utf8))
        }
    }

    func testAPasscodeBoundKeyDiesWithThePasscodeAndStaysDead() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let access = SecAccessControlCreateWithFlags(
                nil,
                kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
                [.privateKeyUsage],
                nil
            )!
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access)
            _ = try key.signature(for: Data("before".utf8))
            try enclave.removePasscode(current: "1234")
            try enclave.setPasscode("1234")
            XCTAssertThrowsError(try key.signature(for: Data("after".utf8))) { error in
                guard case .keyInvalidated? = error as? SecureEnclaveKeyError else { return XCTFail("\(error)") }
            }
        }
    }

    func testAForeignMasterKeyStopsTheDaemonInsteadOfLosingItems() throws {
        let enclave = try TestEnclave()
        enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "keep",
                        kSecValueData as String: Data("v".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        enclave.stop()
        let keyFile = enclave.directory + "/keys/master.key"
        let original = try Data(contentsOf: URL(fileURLWithPath: keyFile))
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: keyFile))
        XCTAssertThrowsError(try enclave.start(), "a daemon must refuse a key that does not belong to its state")
        XCTAssertTrue(enclave.log().contains("does not belong to the state"), enclave.log())
        try original.write(to: URL(fileURLWithPath: keyFile))
        try enclave.start()
        enclave.run {
            var item: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "keep",
                        kSecReturnData as String: true,
                    ] as CFDictionary,
                    &item
                ),
                errSecSuccess
            )
        }
    }
}
