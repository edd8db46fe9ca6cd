import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

final class EvaluateAccessControlTests: XCTestCase {
    func testAnEvaluatedAccessControlLetsTheKeychainReadWithoutAnotherPrompt() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            let access = SecAccessControlCreateWithFlags(
                nil,
                kSecAttrAccessibleWhenUnlocked,
                [.biometryAny, .and, .devicePasscode],
                nil
            )!
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "two-factor",
                        kSecAttrAccessControl as String: access, kSecValueData as String: Data("v".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
            let context = LAContext()
            try enclave.queue(.match, .passcode("1234"))
            let ok = try await context.evaluateAccessControl(
                access,
                operation: .useItem,
                localizedReason: "Read the vault"
            )
            XCTAssertTrue(ok)
            var item: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "two-factor",
                        kSecUseAuthenticationContext as String: context, kSecReturnData as String: true,
                    ] as CFDictionary,
                    &item
                ),
                errSecSuccess,
                "both factors were proven on the context: no prompt"
            )
            XCTAssertEqual(item as? Data, Data("v".utf8))

            let other = LAContext()
            try enclave.queue(.match, .cancel)
            do {
                _ = try await other.evaluateAccessControl(
                    access,
                    operation: .useItem,
                    localizedReason: "Read the vault"
                )
                XCTFail("the passcode step was cancelled")
            } catch let e as LAError {
                XCTAssertEqual(e.code, .userCancel)
            }
        }
    }
}
