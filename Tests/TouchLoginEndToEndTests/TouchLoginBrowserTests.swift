import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import TouchLoginClient
import WebAuthn
import XCTest

/// The login web page in a real headless browser (Debian's Chromium) with a virtual authenticator
/// attached through the DevTools protocol (interop/browser_passkey.py).
final class TouchLoginBrowserTests: XCTestCase {
    func testThePageRegistersAPasskeySignsOutAndSignsInWithIt() throws {
        guard let python = ProcessInfo.processInfo.environment["TOUCHLOGIN_INTEROP_PYTHON"],
            FileManager.default.isExecutableFile(atPath: python)
        else {
            throw XCTSkip("no interop Python: run through scripts/test (scripts/setup-interop)")
        }
        guard
            let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first(
                where: FileManager.default.isExecutableFile(atPath:)
            )
        else {
            throw XCTSkip("no Chromium: scripts/setup-debian installs Debian's chromium")
        }
        let server = try LoginServerProcess()
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("interop/browser_passkey.py").path
        let out = try runProcess(python, [script, chromium, server.baseURL], timeout: 120)
        XCTAssertEqual(out.status, 0, out.stdout + out.stderr)
        XCTAssertTrue(out.stdout.contains("signed in with it"), out.stdout)
        XCTAssertTrue(
            out.stdout.contains("ok: autofill signed in"),
            "passkey autofill (conditional mediation): " + out.stdout
        )
        XCTAssertTrue(
            out.stdout.contains("step-up accepted"),
            "adding a device from a passkey session asked for the password: " + out.stdout
        )
        let (_, session, _) = try server.http(
            "POST",
            "/api/session",
            json: ["username": "browser-user", "password": "correct horse battery"]
        )
        let token = try XCTUnwrap((session as? [String: Any])?["token"] as? String)
        let (_, devices, _) = try server.http("GET", "/api/devices", token: token)
        let device = try XCTUnwrap((devices as? [[String: Any]])?.first)
        XCTAssertEqual(device["name"] as? String, "headless chromium")
        XCTAssertGreaterThan(device["signCount"] as? Int ?? 0, 0, "the browser's assertion moved the counter")
    }
}
