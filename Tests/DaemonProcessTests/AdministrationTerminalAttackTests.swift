import EnclaveClient
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import Security
import XCTest

/// Administration only on the person's trusted path (issue 33): an app that knows the passcode
/// makes a pseudo-terminal of its own — script(1) here, which holds the master and copies what it
/// is given into it — runs lactl on it and types the passcode into the master. Before, the
/// daemon's prompt on that terminal took it and lactl listed every app's items; now the terminal's
/// other side is the app's, and administration is refused there (`TerminalHolders`).
final class AdministrationTerminalAttackTests: XCTestCase {
    func testAPseudoTerminalTheAppHoldsAdministersNothing() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            throw XCTSkip("needs script(1) for a pseudo-terminal")
        }
        let enclave = try TestEnclave()
        enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bank.example",
                        kSecAttrAccount as String: "victim", kSecValueData as String: Data("v".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        let command = "'\(productPath("lactl"))' keychain list --socket '\(enclave.socketPath)'"
        var environment = ProcessInfo.processInfo.environment
        environment["SHELL"] = "/bin/sh"
        let out = try runProcess(
            "/usr/bin/script",
            ["-qefc", command, "/dev/null"],
            input: "1234\n",
            environment: environment,
            headless: false,
            timeout: 60
        )
        XCTAssertNotEqual(out.status, 0, "the app's own terminal administered: \(out.stdout)")
        XCTAssertFalse(out.stdout.contains("victim"), "another app's item was listed: \(out.stdout)")
        XCTAssertTrue(
            out.stdout.contains("held by /usr/bin/script"),
            "the refusal names the holder: \(out.stdout) \(out.stderr)"
        )
        XCTAssertTrue(out.stdout.contains("in your own terminal"), "and says what to do: \(out.stdout)")
    }
}
