import EnclaveClient
import Foundation
import XCTest

@testable import Security

final class ErrorMessageTests: XCTestCase {
    func testEveryListedStatusHasAMessage() {
        let expected: [(OSStatus, String)] = [
            (errSecSuccess, "No error."),
            (errSecUnimplemented, "not implemented"),
            (errSecParam, "parameters passed to a function were not valid"),
            (errSecAllocate, "allocate memory"),
            (errSecUserCanceled, "User canceled"),
            (errSecNotAvailable, "No keychain is available"),
            (errSecAuthFailed, "passphrase you entered is not correct"),
            (errSecDuplicateItem, "already exists"),
            (errSecItemNotFound, "could not be found"),
            (errSecInvalidItemRef, "no longer valid"),
            (errSecInteractionNotAllowed, "User interaction is not allowed."),
            (errSecInteractionRequired, "User interaction is required"),
            (errSecDecode, "Unable to decode"),
            (errSecMissingEntitlement, "entitlement"),
            (errSecVerifyFailed, "verification failure"),
        ]
        for (status, text) in expected {
            let m = SecCopyErrorMessageString(status, nil) as String?
            XCTAssertNotNil(m)
            XCTAssertTrue(m?.contains(text) == true, "\(status): \(m ?? "nil")")
        }
        XCTAssertTrue(
            (SecCopyErrorMessageString(errSecInvalidItemRef, nil) as String?)?.contains("enrolled biometrics") == true
        )
        XCTAssertEqual(Set(expected.map { secErrorMessage($0.0) }).count, expected.count, "messages are distinct")
    }

    func testUnknownStatus() {
        XCTAssertEqual(SecCopyErrorMessageString(-12345, nil) as String?, "OSStatus -12345")
    }

    /// While no daemon serves this process, `errSecNotAvailable`'s text says why and what fixes it.
    func testNotAvailableSaysWhyOnceNoDaemonAnswered() {
        let environment = NoDaemonEnvironment()
        DaemonDiagnostics.reset()
        let previous = DaemonDiagnostics.setWriter { _ in }
        defer {
            DaemonDiagnostics.setWriter(previous)
            DaemonDiagnostics.reset()
            environment.restore()
        }
        XCTAssertEqual(
            SecCopyErrorMessageString(errSecNotAvailable, nil) as String?,
            "No keychain is available. The keychain daemon (laenclaved) could not be reached."
        )
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "nobody"]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, nil), errSecNotAvailable)
        let text = SecCopyErrorMessageString(errSecNotAvailable, nil) as String?
        XCTAssertTrue(
            text?.hasPrefix(
                "No keychain is available. The keychain daemon (laenclaved) could not be reached. no laenclaved for this process: "
            ) == true,
            text ?? "nil"
        )
        XCTAssertTrue(
            text?.contains("/tmp/no-such-daemon/socket (named by $LAENCLAVED_SOCKET): nothing answers there") == true,
            text ?? "nil"
        )
        XCTAssertTrue(text?.contains("Fix: start a daemon there") == true, text ?? "nil")
    }
}
