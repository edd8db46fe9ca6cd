import Crypto
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import TouchLoginTestSupport
import WebAuthn
import XCTest

/// The server's WebAuthn rules over real HTTP, with a software authenticator in the test.
final class TouchLoginServerTests: XCTestCase {
    /// An account with one registered software credential; returns the authenticator.
    private func registered(_ server: LoginServerProcess, username: String = "carol") throws -> SoftwareAuthenticator {
        let (created, session, _) = try server.http(
            "POST",
            "/api/accounts",
            json: ["username": username, "password": "correct horse"]
        )
        XCTAssertEqual(created, 201)
        let token = (session as! [String: Any])["token"] as! String
        let (_, options, _) = try server.http(
            "POST",
            "/api/devices/options",
            json: ["deviceName": "soft"],
            token: token
        )
        let authenticator = SoftwareAuthenticator(origin: server.baseURL)
        let publicKey = (options as! [String: Any])["publicKey"] as! [String: Any]
        let (status, body, _) = try server.http(
            "POST",
            "/api/devices",
            json: ["credential": try authenticator.registration(options: publicKey)],
            token: token
        )
        XCTAssertEqual(status, 201, "\(String(describing: body))")
        return authenticator
    }

    private func loginOptions(_ server: LoginServerProcess) throws -> [String: Any] {
        let (_, options, _) = try server.http("POST", "/api/passkey/options", json: ["username": "carol"])
        return (options as! [String: Any])["publicKey"] as! [String: Any]
    }

    func testReplayCounterRegressionAndWrongOriginAreRefused() throws {
        let server = try LoginServerProcess()
        var authenticator = try registered(server)
        let assertion = try authenticator.assertion(options: try loginOptions(server))
        XCTAssertEqual(try server.http("POST", "/api/passkey/login", json: ["credential": assertion]).0, 200)
        let replay = try server.http("POST", "/api/passkey/login", json: ["credential": assertion])
        XCTAssertEqual(LoginServerProcess.code(replay.1), "challenge_unknown", "a challenge is single-use")

        let regressed = try authenticator.assertion(options: try loginOptions(server), counter: 1)
        XCTAssertEqual(
            LoginServerProcess.code(try server.http("POST", "/api/passkey/login", json: ["credential": regressed]).1),
            "counter_regression"
        )

        let foreign = try authenticator.assertion(
            options: try loginOptions(server),
            origin: "http://evil.example",
            counter: 10
        )
        XCTAssertEqual(
            LoginServerProcess.code(try server.http("POST", "/api/passkey/login", json: ["credential": foreign]).1),
            "origin_mismatch"
        )

        let good = try authenticator.assertion(options: try loginOptions(server), counter: 11)
        XCTAssertEqual(
            try server.http("POST", "/api/passkey/login", json: ["credential": good]).0,
            200,
            "the credential still works"
        )
    }

    func testAnExpiredChallengeIsRefused() throws {
        let server = try LoginServerProcess(["--challenge-lifetime", "1"])
        var authenticator = try registered(server)
        let options = try loginOptions(server)
        Thread.sleep(forTimeInterval: 1.3)
        let late = try authenticator.assertion(options: options)
        XCTAssertEqual(
            LoginServerProcess.code(try server.http("POST", "/api/passkey/login", json: ["credential": late]).1),
            "challenge_expired"
        )
    }

    func testMalformedCBORAndJSONGetClearErrors() throws {
        let server = try LoginServerProcess()
        let authenticator = try registered(server)
        let (_, session, _) = try server.http(
            "POST",
            "/api/session",
            json: ["username": "carol", "password": "correct horse"]
        )
        let token = (session as! [String: Any])["token"] as! String
        let (_, options, _) = try server.http("POST", "/api/devices/options", json: [String: Any](), token: token)
        var credential = try authenticator.registration(
            options: (options as! [String: Any])["publicKey"] as! [String: Any]
        )
        var response = credential["response"] as! [String: Any]
        // truncated CBOR map
        response["attestationObject"] = Data([0xa3, 0x63, 0x66, 0x6d, 0x74, 0xff]).base64URLEncodedString()
        credential["response"] = response
        let (status, body, _) = try server.http("POST", "/api/devices", json: ["credential": credential], token: token)
        XCTAssertEqual(status, 400)
        XCTAssertEqual(LoginServerProcess.code(body), "malformed_cbor", "\(String(describing: body))")

        let (jsonStatus, jsonBody, _) = try server.http("POST", "/api/session", body: Data("{\"username\": ".utf8))
        XCTAssertEqual(jsonStatus, 400)
        XCTAssertEqual(LoginServerProcess.code(jsonBody), "malformed_request")
        let (missingStatus, missingBody, _) = try server.http("POST", "/api/session", json: ["username": "carol"])
        XCTAssertEqual(missingStatus, 400)
        XCTAssertTrue(
            ((missingBody as? [String: Any])?["error"] as? [String: Any])?["message"].map { "\($0)" }?.contains(
                "password"
            ) ?? false
        )
        let huge = try server.http("POST", "/api/session", body: Data(repeating: 0x20, count: 100_000))
        XCTAssertEqual(LoginServerProcess.code(huge.1), "payload_too_large")
    }

    func testRateLimitsPerAccountAndPerAddress() throws {
        let server = try LoginServerProcess(["--account-failure-limit", "3", "--address-limit", "8"])
        XCTAssertEqual(
            try server.http("POST", "/api/accounts", json: ["username": "dave", "password": "correct horse"]).0,
            201
        )
        for _ in 0..<3 {
            XCTAssertEqual(
                LoginServerProcess.code(
                    try server.http("POST", "/api/session", json: ["username": "dave", "password": "guess"]).1
                ),
                "invalid_credentials"
            )
        }
        let (status, body, headers) = try server.http(
            "POST",
            "/api/session",
            json: ["username": "dave", "password": "correct horse"]
        )
        XCTAssertEqual(status, 429, "even the right password waits once the account saw 3 failures")
        XCTAssertEqual(LoginServerProcess.code(body), "rate_limited")
        XCTAssertNotNil(headers["Retry-After"] ?? headers["retry-after"])
        var codes: [String?] = []
        for _ in 0..<5 {
            codes.append(
                LoginServerProcess.code(
                    try server.http(
                        "POST",
                        "/api/session",
                        json: ["username": "nobody-\(codes.count)", "password": "x"]
                    ).1
                )
            )
        }
        XCTAssertEqual(codes.last, "rate_limited", "the address is limited too: \(codes)")
    }

    func testALockedPasswordPathOpensWithTheOperatorsLiftLock() throws {
        let server = try LoginServerProcess(["--account-failure-limit", "0", "--password-lock-after", "1"])
        XCTAssertEqual(
            try server.http("POST", "/api/accounts", json: ["username": "frank", "password": "correct horse"]).0,
            201
        )
        XCTAssertEqual(
            LoginServerProcess.code(
                try server.http("POST", "/api/session", json: ["username": "frank", "password": "guess"]).1
            ),
            "invalid_credentials"
        )
        let (status, body, _) = try server.http(
            "POST",
            "/api/session",
            json: ["username": "frank", "password": "correct horse"]
        )
        XCTAssertEqual(status, 423)
        XCTAssertEqual(LoginServerProcess.code(body), "password_locked")
        let lift = try runProcess(
            productPath("touchlogin-server"),
            ["lift-lock", "--database", server.directory + "/server.sqlite", "frank"]
        )
        XCTAssertEqual(lift.status, 0, lift.stderr)
        XCTAssertEqual(
            try server.http("POST", "/api/session", json: ["username": "frank", "password": "correct horse"]).0,
            200
        )
    }

    /// `touchlogin-server admin`, as an operator runs it beside the running server.
    func testTheOperatorsAdminCommands() throws {
        let server = try LoginServerProcess([])
        XCTAssertEqual(
            try server.http("POST", "/api/accounts", json: ["username": "hana", "password": "correct horse"]).0,
            201
        )
        let database = ["--database", server.directory + "/server.sqlite"]
        let account = try runProcess(productPath("touchlogin-server"), ["admin", "account", "hana"] + database)
        XCTAssertEqual(account.status, 0, account.stderr)
        XCTAssertTrue(account.stdout.contains("account   hana") && account.stdout.contains("sign-up"), account.stdout)
        let json = try runProcess(productPath("touchlogin-server"), ["admin", "account", "hana", "--json"] + database)
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        XCTAssertEqual(object?["username"] as? String, "hana")
        let nobody = try runProcess(productPath("touchlogin-server"), ["admin", "account", "nobody"] + database)
        XCTAssertNotEqual(nobody.status, 0)
        XCTAssertTrue(nobody.stderr.contains("No account is named nobody"), nobody.stderr)
        let revoke = try runProcess(productPath("touchlogin-server"), ["admin", "revoke", "hana", "AAAA"] + database)
        XCTAssertNotEqual(revoke.status, 0)
        XCTAssertTrue(revoke.stderr.contains("No such device"), revoke.stderr)
    }

    func testSIGTERMEndsTheServerCleanly() throws {
        let directory = NSTemporaryDirectory() + "login-sigterm-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let port = LoginServerProcess.freePort()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: productPath("touchlogin-server"))
        server.arguments = [
            "--port", String(port), "--database", directory + "/server.sqlite", "--log-level", "warning",
        ]
        let errors = Pipe()
        server.standardError = errors
        server.standardOutput = FileHandle.nullDevice
        try server.run()
        eventually("the server answers") {
            (try? Data(contentsOf: URL(string: "http://localhost:\(port)/health")!)) != nil
        }
        server.terminate()
        server.waitUntilExit()
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(server.terminationStatus, 0, said)
        XCTAssertFalse(said.contains("Error"), said)
    }

    func testHealthMetricsOpenAPIAndThePage() throws {
        let server = try LoginServerProcess()
        let (status, health, _) = try server.http("GET", "/health")
        XCTAssertEqual(status, 200)
        XCTAssertEqual((health as? [String: Any])?["storage"] as? String, "sqlite")
        _ = try registered(server)
        let metrics = try String(contentsOf: URL(string: server.baseURL + "/metrics")!, encoding: .utf8)
        XCTAssertTrue(metrics.contains("touchlogin_device_registrations_total{result=\"success\"} 1"), metrics)
        let openapi = try String(contentsOf: URL(string: server.baseURL + "/openapi.yaml")!, encoding: .utf8)
        XCTAssertTrue(openapi.contains("/api/passkey/login"))
        let page = try String(contentsOf: URL(string: server.baseURL + "/")!, encoding: .utf8)
        XCTAssertTrue(page.contains("navigator.credentials.get"))
        XCTAssertEqual(LoginServerProcess.code(try server.http("GET", "/api/nothing").1), "not_found")
    }
}
