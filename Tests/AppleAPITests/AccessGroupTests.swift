import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

/// Sharing items between apps happens only through a group the person configured (with the passcode).
final class AccessGroupTests: XCTestCase {
    func testAnotherAppReadsASharedItemOnlyAfterThePersonSharesIt() throws {
        let enclave = try TestEnclave()
        let lactl = productPath("lactl")
        let socket = ["--socket", enclave.socketPath]
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        // Not configured yet: the group is refused.
        enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "team-db",
                        kSecAttrAccessGroup as String: "team", kSecValueData as String: Data("pw".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecMissingEntitlement
            )
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "private-db",
                        kSecValueData as String: Data("mine".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        XCTAssertEqual(
            try runProcess(lactl, ["keychain", "share", "team", me, lactl, "--stdin"] + socket, input: "1234\n").status,
            0
        )
        enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "team-db",
                        kSecAttrAccessGroup as String: "team", kSecValueData as String: Data("pw".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        let shared = try runProcess(lactl, ["keychain", "get", "--service", "team-db"] + socket)
        XCTAssertEqual(shared.status, 0, shared.stderr)
        XCTAssertEqual(shared.stdout, "pw", "a member app reads the shared item")
        let own = try runProcess(lactl, ["keychain", "get", "--service", "private-db"] + socket)
        XCTAssertNotEqual(own.status, 0, "the other app's own items stay its own")
        XCTAssertTrue(own.stderr.contains("-25300"), own.stderr)
        // Removing the group ends the sharing.
        XCTAssertEqual(
            try runProcess(lactl, ["keychain", "share", "team", "--stdin"] + socket, input: "1234\n").status,
            0
        )
        XCTAssertNotEqual(try runProcess(lactl, ["keychain", "get", "--service", "team-db"] + socket).status, 0)
        // A group named like an app would hand over that app's items: refused.
        let impersonation = try runProcess(
            lactl,
            ["keychain", "share", me, lactl, "--stdin"] + socket,
            input: "1234\n"
        )
        XCTAssertEqual(impersonation.status, 1)
    }
}
