import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

/// `lactl keychain`: the user's items of every app, metadata only, behind the passcode.
final class LactlKeychainTests: XCTestCase {
    func testListWhyAndDelete() throws {
        let enclave = try TestEnclave()
        enclave.run {
            let access = SecAccessControlCreateWithFlags(
                nil,
                kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
                .biometryCurrentSet,
                nil
            )!
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "example.com",
                        kSecAttrAccount as String: "alice", kSecAttrAccessControl as String: access,
                        kSecValueData as String: Data("s3cret-value".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        try enclave.enroll("left-thumb")
        let lactl = productPath("lactl")
        let socket = ["--socket", enclave.socketPath]
        let list = try runProcess(lactl, ["keychain", "list", "--json", "--stdin"] + socket, input: "1234\n")
        XCTAssertEqual(list.status, 0, list.stderr)
        XCTAssertFalse(list.stdout.contains("s3cret-value"), "never values")
        let items = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as! [[String: Any]]
        XCTAssertEqual(items.count, 1)
        XCTAssertEqual(items[0]["account"] as? String, "alice")
        XCTAssertEqual(items[0]["protection"] as? String, "akpu")
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        XCTAssertEqual(items[0]["app"] as? String, me, "the owning app")
        let ref = try XCTUnwrap(items[0]["persistentRef"] as? String)
        let why = try runProcess(lactl, ["keychain", "why", ref, "--stdin"] + socket, input: "1234\n")
        XCTAssertTrue(why.stdout.contains("biometryCurrentSet"), why.stdout)
        let wrong = try runProcess(lactl, ["keychain", "list", "--stdin"] + socket, input: "0000\n")
        XCTAssertEqual(wrong.status, 1)
        XCTAssertEqual(try enclave.status().passcodeFailures, 1, "a wrong passcode here is a counted guess")
        XCTAssertEqual(
            try runProcess(lactl, ["keychain", "delete", ref, "--stdin"] + socket, input: "1234\n").status,
            0
        )
        let after = try runProcess(lactl, ["keychain", "list", "--stdin"] + socket, input: "1234\n")
        XCTAssertTrue(after.stdout.contains("no items"), after.stdout)
    }

    /// Attack: an app names its item, or its own executable, with terminal control sequences (a
    /// title change, a screen clear, an 8-bit CSI, a bidi override); whoever runs `lactl keychain
    /// list` or `lactl audit` — root, in system mode — must see them as text, never obey them.
    func testControlSequencesFromAppsReachTheTerminalOnlyAsText() throws {
        let enclave = try TestEnclave()
        let hostile = "label\u{1B}]0;owned\u{07}\u{1B}[2J\u{9B}31m\u{202E}gnp.exe\nfake line"
        enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                        kSecAttrAccount as String: hostile, kSecAttrLabel as String: hostile,
                        kSecValueData as String: Data("v".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        // An app whose path carries an escape: its requests are audited under that path.
        let evil = enclave.directory + "/evil\u{1B}[31mapp"
        try FileManager.default.copyItem(atPath: productPath("lactl"), toPath: evil)
        chmod(evil, 0o755)
        let socket = ["--socket", enclave.socketPath]
        XCTAssertEqual(try runProcess(evil, ["keychain", "list", "--stdin"] + socket, input: "1234\n").status, 0)

        let lactl = productPath("lactl")
        let list = try runProcess(lactl, ["keychain", "list", "--stdin"] + socket, input: "1234\n")
        let audit = try runProcess(lactl, ["audit", "--all", "--stdin"] + socket, input: "1234\n")
        XCTAssertEqual(list.status, 0, list.stderr)
        XCTAssertEqual(audit.status, 0, audit.stderr)
        XCTAssertTrue(audit.stdout.contains("evil"), audit.stdout)
        for (what, out) in [("keychain list", list.stdout), ("audit", audit.stdout)] {
            let controls = out.unicodeScalars.filter {
                ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value)
                    || (0x202A...0x202E).contains($0.value)
            }
            XCTAssertEqual(
                controls.map { String($0.value, radix: 16) },
                [],
                "\(what) wrote control characters: \(out.debugDescription)"
            )
        }
        XCTAssertTrue(list.stdout.contains("\\u{1B}]0;owned"), "shown as text: \(list.stdout)")
        XCTAssertFalse(list.stdout.contains("\nfake line"), "an item cannot start a line of its own: \(list.stdout)")
        XCTAssertTrue(audit.stdout.contains("evil\\u{1B}[31mapp"), "shown as text: \(audit.stdout)")
        // --json stays JSON, with the same text inside, and no control character reaches the terminal either.
        let json = try runProcess(lactl, ["keychain", "list", "--json", "--stdin"] + socket, input: "1234\n")
        XCTAssertEqual(json.status, 0, json.stderr)
        let controls = json.stdout.unicodeScalars.filter {
            ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) || (0x202A...0x202E).contains($0.value)
        }
        XCTAssertEqual(controls.map { String($0.value, radix: 16) }, [], json.stdout.debugDescription)
        let items = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]],
            json.stdout
        )
        XCTAssertEqual(items.first?["account"] as? String, hostile, "the same text, exactly")
    }
}
