import Crypto
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import WebAuthn
import XCTest

/// The fingerprint-login flow end to end: the real daemon (simulated sensor), the real server
/// (SQLite) and the real client, each its own process.
final class TouchLoginFlowTests: XCTestCase {
    func testFirstLoginEnablesThenTheFingerprintLogsIn() throws {
        for sensor in [TestEnclave.Sensor.touchID, .faceID] {
            let enclave = try TestEnclave(.with { $0.sensor = sensor })
            let server = try LoginServerProcess()
            let client = LoginClient(enclave: enclave, server: server)
            try client.signUpAndEnable()
            try enclave.queue(.match)
            let second = try client.run([])
            XCTAssertEqual(second.status, 0, second.stderr)
            XCTAssertTrue(second.stdout.contains("with your fingerprint"), "\(sensor): \(second.stdout)")
            XCTAssertFalse(second.stdout.contains("Password"), "no password asked")
            let status = try client.run(["status", "--json"])
            let json = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as! [String: Any]
            XCTAssertEqual(json["fingerprintEnabled"] as? Bool, true)
            XCTAssertEqual(json["sessionAlive"] as? Bool, true)
            XCTAssertEqual((json["devices"] as? [[String: Any]])?.first?["signCount"] as? Int, 1)
        }
    }

    /// `--require-attestation`: the server binds the daemon's key once it checks the chain to the
    /// root `lactl attestation-root` printed; a server trusting another machine's root, or one that
    /// does not accept a daemon that takes simulated touches, refuses it with the reason.
    func testAServerThatRequiresAttestationBindsOnlyKeysItsRootsVouchFor() throws {
        let enclave = try TestEnclave()
        let otherMachine = try TestEnclave()
        func root(of daemon: TestEnclave) throws -> String {
            let printed = try runProcess(productPath("lactl"), ["attestation-root", "--socket", daemon.socketPath])
            XCTAssertEqual(printed.status, 0, printed.stderr)
            let path = daemon.directory + "/root.pem"
            try printed.stdout.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let ours = try root(of: enclave)
        let theirs = try root(of: otherMachine)

        let testing = ["--attestation-allows-user-daemons", "--attestation-allows-simulation"]  // a test daemon is both
        let trusting = try LoginServerProcess(["--require-attestation", ours] + testing)
        let client = LoginClient(enclave: enclave, server: trusting)
        try client.signUpAndEnable()
        let status =
            try JSONSerialization.jsonObject(with: Data(try client.run(["status", "--json"]).stdout.utf8))
            as! [String: Any]
        let attested = (status["devices"] as? [[String: Any]])?.first?["attestedKey"] as? String
        XCTAssertTrue(
            attested?.hasPrefix(
                "user daemon, simulated (simulation allowed), biometryCurrentSet,privateKeyUsage (akpu); root "
            ) == true,
            attested ?? "not attested"
        )
        try enclave.queue(.match)
        XCTAssertTrue(try client.run([]).stdout.contains("with your fingerprint"))

        for (arguments, reason) in [
            (["--require-attestation", theirs] + testing, "does not chain to an attestation root"),
            (["--require-attestation", ours, "--attestation-allows-user-daemons"], "accepts simulated touches"),
            (["--require-attestation", ours, "--attestation-allows-simulation"], "user-mode daemon"),
        ] {
            let server = try LoginServerProcess(arguments)
            let refused = LoginClient(enclave: enclave, server: server)
            XCTAssertEqual(try refused.run(["signup", "--username", "bob"], input: "correct horse\n").status, 0)
            try enclave.queue(.match)
            let enable = try refused.run([], input: "correct horse\ny\n")
            XCTAssertTrue((enable.stdout + enable.stderr).contains(reason), enable.stdout + enable.stderr)
            XCTAssertFalse(enable.stdout.contains("Fingerprint login is enabled"), enable.stdout)
        }
    }

    func testEnablingAgainAfterAFingerprintLoginAsksForThePassword() throws {
        let enclave = try TestEnclave()
        let server = try LoginServerProcess()
        let client = LoginClient(enclave: enclave, server: server)
        try client.signUpAndEnable()
        try enclave.queue(.match)
        XCTAssertTrue(try client.run([]).stdout.contains("with your fingerprint"))
        // The session was made by the fingerprint: the server wants the password before a new key.
        try enclave.queue(.match)
        let refused = try client.run(["enable"], input: "wrong password\n")
        XCTAssertNotEqual(refused.status, 0, refused.stdout)
        try enclave.queue(.match)
        let enabled = try client.run(["enable"], input: "correct horse\n")
        XCTAssertEqual(enabled.status, 0, enabled.stdout + enabled.stderr)
        XCTAssertTrue(enabled.stdout.contains("Fingerprint login is enabled"), enabled.stdout)
        let status =
            try JSONSerialization.jsonObject(with: Data(try client.run(["status", "--json"]).stdout.utf8))
            as! [String: Any]
        XCTAssertEqual((status["devices"] as? [[String: Any]])?.count, 1, "the old key was revoked, the new one bound")
    }

    /// Enabling again replaces the binding only once the new one is bound: a cancelled touch
    /// leaves the old key bound, and the fingerprint still logs in.
    func testAnEnableThatFailsKeepsTheBindingItWouldReplace() throws {
        let enclave = try TestEnclave()
        let server = try LoginServerProcess()
        let client = LoginClient(enclave: enclave, server: server)
        try client.signUpAndEnable()
        try enclave.queue(.cancel)
        let cancelled = try client.run(["enable"], input: "correct horse\n")
        XCTAssertFalse(cancelled.stdout.contains("Fingerprint login is enabled"), cancelled.stdout)
        try enclave.queue(.match)
        let login = try client.run([])
        XCTAssertTrue(login.stdout.contains("with your fingerprint"), login.stdout + login.stderr)
    }

    func testADeviceIsToldWhenAnotherWasBoundAndStatusShowsTheActivity() throws {
        let server = try LoginServerProcess()
        let phone = LoginClient(enclave: try TestEnclave(), server: server)
        try phone.signUpAndEnable()
        let laptopEnclave = try TestEnclave()
        let laptop = LoginClient(enclave: laptopEnclave, server: server)
        try laptopEnclave.queue(.match)
        let bound = try laptop.run(["--username", "alice", "--device-name", "laptop"], input: "correct horse\ny\n")
        XCTAssertTrue(bound.stdout.contains("Fingerprint login is enabled"), bound.stdout + bound.stderr)
        try phone.enclave.queue(.match)
        let next = try phone.run([])
        XCTAssertTrue(
            next.stdout.contains("a device was added to your account since this one last logged in: \"laptop\""),
            next.stdout
        )
        let status = try phone.run(["status"]).stdout
        XCTAssertTrue(status.contains("device-added \"laptop\" from 127.0.0.1"), status)
        XCTAssertTrue(status.contains("passkey-login"), status)
    }

    func testDevicesAreListedRenamedAndRemovedFromTheClient() throws {
        let server = try LoginServerProcess()
        let phone = LoginClient(enclave: try TestEnclave(), server: server)
        try phone.signUpAndEnable()
        let laptopEnclave = try TestEnclave()
        try laptopEnclave.queue(.match)
        _ = try LoginClient(enclave: laptopEnclave, server: server).run(
            ["--username", "alice", "--device-name", "laptop"],
            input: "correct horse\ny\n"
        )
        try phone.enclave.queue(.match)
        XCTAssertTrue(try phone.run([]).stdout.contains("with your fingerprint"))
        let listed = try phone.run(["devices"])
        XCTAssertTrue(listed.stdout.contains("- laptop"), listed.stdout)
        XCTAssertTrue(listed.stdout.contains("* "), "this device is marked: \(listed.stdout)")
        XCTAssertTrue(
            listed.stdout.contains("this device only, verifies the user, internal"),
            "what the authenticator said of each: \(listed.stdout)"
        )
        // A fingerprint session: the server asks for the password before the change.
        let renamed = try phone.run(["devices", "rename", "laptop", "work laptop"], input: "correct horse\n")
        XCTAssertEqual(renamed.status, 0, renamed.stdout + renamed.stderr)
        XCTAssertTrue(renamed.stdout.contains("Renamed \"laptop\" to \"work laptop\""), renamed.stdout)
        let removed = try phone.run(["devices", "remove", "work laptop"])
        XCTAssertEqual(removed.status, 0, removed.stdout + removed.stderr)
        XCTAssertFalse(try phone.run(["devices"]).stdout.contains("laptop"))
        XCTAssertNotEqual(try phone.run(["devices", "remove", "nothing"]).status, 0)
    }

    func testThePasswordChangesFromTheClient() throws {
        let enclave = try TestEnclave()
        let server = try LoginServerProcess()
        let client = LoginClient(enclave: enclave, server: server)
        try client.signUpAndEnable()
        let changed = try client.run(["password"], input: "correct horse\nbattery staple horse\n")
        XCTAssertEqual(changed.status, 0, changed.stdout + changed.stderr)
        XCTAssertEqual(
            try server.http("POST", "/api/session", json: ["username": "alice", "password": "battery staple horse"]).0,
            200
        )
        XCTAssertTrue(try client.run(["status"]).stdout.contains("password-changed"))
    }

    func testThreeNonMatchesThenThePasswordWithOnePromptPerLaunch() throws {
        let enclave = try TestEnclave()
        let server = try LoginServerProcess()
        let client = LoginClient(enclave: enclave, server: server)
        try client.signUpAndEnable()
        try enclave.queue(.nomatch, .nomatch, .nomatch)
        let out = try client.run([], input: "correct horse\n")
        XCTAssertEqual(out.status, 0, out.stderr)
        XCTAssertTrue(out.stdout.contains("not recognised"), out.stdout)
        XCTAssertTrue(out.stdout.contains("with your password"), out.stdout)
        XCTAssertEqual(try enclave.status().queuedEvents, 0)
        // Fingerprint login stays enabled: the next launch prompts again.
        try enclave.queue(.match)
        XCTAssertTrue(try client.run([]).stdout.contains("with your fingerprint"))
    }

    func testCancelGoesToThePasswordWithoutASecondPrompt() throws {
        let enclave = try TestEnclave()
        let server = try LoginServerProcess()
        let client = LoginClient(enclave: enclave, server: server)
        try client.signUpAndEnable()
        try enclave.queue(.cancel, .match)
        let out = try client.run([], input: "correct horse\n")
        XCTAssertEqual(out.status, 0, out.stderr)
        XCTAssertTrue(out.stdout.contains("cancelled"), out.stdout)
        XCTAssertTrue(out.stdout.contains("with your password"), out.stdout)
        XCTAssertEqual(try enclave.status().queuedEvents, 1, "one prompt per launch: the queued match is still there")
    }

    func testLockoutAfterFiveThenThePasscodeUnlocksTheFingerprint() throws {
        let enclave = try TestEnclave()
        let server = try LoginServerProcess()
        let client = LoginClient(enclave: enclave, server: server)
        try client.signUpAndEnable()
        try enclave.queue(.nomatch, .nomatch, .nomatch)
        XCTAssertTrue(try client.run([], input: "correct horse\n").stdout.contains("with your password"))
        try enclave.queue(.nomatch, .nomatch)
        let locked = try client.run([], input: "correct horse\n")
        XCTAssertTrue(locked.stdout.contains("locked"), locked.stdout)
        XCTAssertTrue(locked.stdout.contains("with your password"), locked.stdout)
        XCTAssertNotNil(try enclave.status().biometryLockout)
        // A locked sensor is not even prompted: straight to the password.
        let again = try client.run([], input: "correct horse\n")
        XCTAssertTrue(again.stdout.contains("locked"), again.stdout)
        // The device passcode (deviceOwnerAuthentication) lifts the lockout; the fingerprint works again.
        try enclave.queue(.passcode("1234"))
        let unlock = try runProcess(
            productPath("lactl"),
            [
                "authenticate", "--socket", enclave.socketPath, "--policy", "deviceOwnerAuthentication", "--reason",
                "Unlock",
            ]
        )
        XCTAssertEqual(unlock.status, 0, unlock.stderr)
        try enclave.queue(.match)
        XCTAssertTrue(try client.run([]).stdout.contains("with your fingerprint"))
    }

    func testAnEnrolmentChangeRequiresThePasswordAndReEnablingReplacesTheDevice() throws {
        let enclave = try TestEnclave()
        let server = try LoginServerProcess()
        let client = LoginClient(enclave: enclave, server: server)
        try client.signUpAndEnable()
        let oldCredential = try XCTUnwrap((client.state()["binding"] as? [String: Any])?["credentialID"] as? String)
        try enclave.enroll("someone-elses-finger")
        try enclave.queue(.match)  // for the re-enabling touch
        let out = try client.run([], input: "correct horse\ny\n")
        XCTAssertEqual(out.status, 0, out.stderr)
        XCTAssertTrue(out.stdout.contains("fingerprints on this device changed"), out.stdout)
        XCTAssertTrue(out.stdout.contains("enabled again"), out.stdout)
        XCTAssertTrue(out.stdout.contains("Fingerprint login is enabled"), out.stdout)
        let newCredential = try XCTUnwrap((client.state()["binding"] as? [String: Any])?["credentialID"] as? String)
        XCTAssertNotEqual(newCredential, oldCredential)
        let (status, devices, _) = try server.http("GET", "/api/devices", token: client.token)
        XCTAssertEqual(status, 200)
        XCTAssertEqual(
            (devices as? [[String: Any]])?.count,
            1,
            "the old credential was revoked: \(String(describing: devices))"
        )
        try enclave.queue(.match)
        XCTAssertTrue(try client.run([]).stdout.contains("with your fingerprint"))
    }

    func testARevokedDeviceFallsBackToThePasswordAndLogoutEndsTheSession() throws {
        let enclave = try TestEnclave()
        let server = try LoginServerProcess()
        let client = LoginClient(enclave: enclave, server: server)
        try client.signUpAndEnable()
        let (_, devices, _) = try server.http("GET", "/api/devices", token: client.token)
        let id = try XCTUnwrap((devices as? [[String: Any]])?.first?["id"] as? String)
        XCTAssertEqual(try server.http("DELETE", "/api/devices/\(id)", token: client.token).0, 204)
        try enclave.queue(.match)
        let out = try client.run([], input: "correct horse\nn\n")
        XCTAssertEqual(out.status, 0, out.stderr)
        XCTAssertTrue(out.stdout.contains("no longer registered"), out.stdout)
        XCTAssertTrue(out.stdout.contains("with your password"), out.stdout)

        let token = try XCTUnwrap(client.token)
        XCTAssertEqual(try client.run(["logout"]).status, 0)
        XCTAssertEqual(
            LoginServerProcess.code(try server.http("GET", "/api/account", token: token).1),
            "unauthorized",
            "logout revokes the session"
        )
    }

    func testThreeWrongPasswordsEndTheRun() throws {
        let enclave = try TestEnclave()
        let server = try LoginServerProcess()
        let client = LoginClient(enclave: enclave, server: server)
        XCTAssertEqual(try client.run(["signup", "--username", "bob"], input: "correct horse\n").status, 0)
        let out = try client.run([], input: "wrong one\nwrong two\nwrong three\n")
        XCTAssertEqual(out.status, 1)
        XCTAssertTrue(out.stderr.contains("Too many wrong passwords"), out.stderr)
    }
}
