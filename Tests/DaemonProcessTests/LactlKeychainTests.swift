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
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, .biometryCurrentSet, nil)!
            XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "example.com",
                                       kSecAttrAccount as String: "alice", kSecAttrAccessControl as String: access,
                                       kSecValueData as String: Data("s3cret-value".utf8)] as CFDictionary, nil), errSecSuccess)
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
        XCTAssertEqual(try runProcess(lactl, ["keychain", "delete", ref, "--stdin"] + socket, input: "1234\n").status, 0)
        let after = try runProcess(lactl, ["keychain", "list", "--stdin"] + socket, input: "1234\n")
        XCTAssertTrue(after.stdout.contains("no items"), after.stdout)
    }
}
