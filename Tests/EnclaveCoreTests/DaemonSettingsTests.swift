import EnclaveCore
import XCTest

final class DaemonSettingsTests: XCTestCase {
    func testDefaults() throws {
        let s = try DaemonSettings.parse("")
        XCTAssertEqual(s.sensor, .auto)
        XCTAssertEqual(s.passcodeSource, .enclave)
        XCTAssertEqual(s.pamService, "laenclaved")
        XCTAssertNil(s.pamUsers)
        XCTAssertNil(s.allowSimulation)
        XCTAssertNil(s.promptAgent)
    }

    func testEveryKeyWithCommentsAndSpaces() throws {
        let s = try DaemonSettings.parse("""
            # a comment
            sensor = fprintd          # trailing comment
              passcode-source=pam
            pam-service = login
            pam-users = alice, bob ,carol

            allow-simulation = yes
            prompt-agent = /opt/la/laenclaved-agent
            """)
        XCTAssertEqual(s.sensor, .fprintd)
        XCTAssertEqual(s.passcodeSource, .pam)
        XCTAssertEqual(s.pamService, "login")
        XCTAssertEqual(s.pamUsers, ["alice", "bob", "carol"])
        XCTAssertEqual(s.allowSimulation, true)
        XCTAssertEqual(s.promptAgent, "/opt/la/laenclaved-agent")
        XCTAssertEqual(try DaemonSettings.parse("prompt-agent = none").promptAgent, "", "none: no agent")
    }

    func testMistakesNameTheirLine() {
        for (text, line, fragment) in [
            ("sensor = fingerprint", 1, "sensor is one of"),
            ("\npasscode-source = ldap", 2, "passcode-source is one of"),
            ("allow-simulation = maybe", 1, "yes or no"),
            ("pam-service = ../shadow", 1, "/etc/pam.d"),
            ("pam-users = ,", 1, "user names"),
            ("sensr = auto", 1, "unknown setting"),
            ("prompt-agent = laenclaved-agent", 1, "absolute path"),
            ("prompt-agent = /usr/bin/", 1, "absolute path"),
            ("just words", 1, "key = value"),
        ] {
            XCTAssertThrowsError(try DaemonSettings.parse(text), text) { error in
                guard let e = error as? DaemonSettings.ParseError else { return XCTFail("\(error)") }
                XCTAssertEqual(e.line, line, text)
                XCTAssertTrue(e.problem.contains(fragment), "\(text): \(e.problem)")
            }
        }
    }

    func testAMissingFileMeansTheDefaults() throws {
        XCTAssertEqual(try DaemonSettings.load("/nonexistent/laenclaved.conf"), DaemonSettings())
    }
}
