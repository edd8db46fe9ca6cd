import Foundation
import LocalAuthentication
import XCTest

@testable import Security

/// Apple's documented keychain snippet must compile unchanged against this module.
final class AppleSnippetTests: NoDaemonTestCase {
    func testAppleSnippetCompilesAndFailsWithoutDaemon() {
        let access = SecAccessControlCreateWithFlags(
            nil,
            kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
            .biometryCurrentSet,
            nil
        )!
        let context = LAContext()
        context.localizedReason = "Access your password on the keychain"
        let add: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrAccount as String: "alice",
            kSecAttrService as String: "example.com",
            kSecAttrAccessControl as String: access,
            kSecUseAuthenticationContext as String: context,
            kSecValueData as String: "s3cret".data(using: .utf8)!,
        ]
        var status = SecItemAdd(add as CFDictionary, nil)
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrAccount as String: "alice",
            kSecAttrService as String: "example.com",
            kSecMatchLimit as String: kSecMatchLimitOne,
            kSecUseAuthenticationContext as String: context,
            kSecReturnData as String: true,
        ]
        var item: CFTypeRef?
        status = SecItemCopyMatching(query as CFDictionary, &item)
        XCTAssertNotEqual(status, errSecSuccess)
        XCTAssertEqual(status, errSecNotAvailable)
        XCTAssertNil(item)
    }

    func testAddWithoutDaemonIsNotAvailable() {
        let add: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "bob",
            kSecValueData as String: Data([1]),
        ]
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecNotAvailable)
    }
}
