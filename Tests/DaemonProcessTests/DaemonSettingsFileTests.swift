import EnclaveClient
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The configuration file chooses the sensor and the passcode source; the command line overrides it;
/// a mistake stops the daemon with its line instead of weakening anything.
final class DaemonSettingsFileTests: XCTestCase {
    private func directory() -> String {
        var template = Array("/tmp/la-conf-XXXXXX".utf8CString)
        return String(cString: mkdtemp(&template)!)
    }

    func testAMistakeInTheFileStopsTheDaemonWithItsLine() throws {
        let dir = directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "sensor = auto\npasscode-source = kerberos\n".write(
            toFile: dir + "/laenclaved.conf",
            atomically: true,
            encoding: .utf8
        )
        let out = try runProcess(
            productPath("laenclaved"),
            [
                "--user", "--socket", dir + "/socket", "--state-dir", dir + "/state",
                "--key-file", dir + "/key", "--config", dir + "/laenclaved.conf",
            ],
            timeout: 20
        )
        XCTAssertNotEqual(out.status, 0)
        XCTAssertTrue(out.stderr.contains("line 2") && out.stderr.contains("passcode-source"), out.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/socket"))
    }

    func testTheFileChoosesTheSensorAndASimulatedSystemSensorIsLoud() throws {
        guard getuid() == 0 else { throw XCTSkip("system mode needs root") }
        let dir = directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "sensor = simulated-faceid   # for a demo machine only\nallow-simulation = yes\n".write(
            toFile: dir + "/laenclaved.conf",
            atomically: true,
            encoding: .utf8
        )
        let daemon = try DaemonLauncher.spawn(
            productPath("laenclaved"),
            [
                "--system", "--socket", dir + "/run/socket", "--state-dir", dir + "/state",
                "--key-file", dir + "/keys/master.key", "--config", dir + "/laenclaved.conf",
                "--passcode-cost", "10", "--exit-with-parent", "--tpm", "off",
            ]
        )
        defer { terminateAndWait(daemon) }
        eventually("the daemon's socket") { FileManager.default.fileExists(atPath: dir + "/run/socket") }
        let status = try runProcess(productPath("lactl"), ["status", "--socket", dir + "/run/socket"])
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertTrue(status.stdout.contains("Simulated Face ID"), status.stdout)
        XCTAssertTrue(
            status.stderr.contains(
                "WARNING: this SYSTEM daemon uses a SIMULATED Face ID sensor and accepts scripted input"
            ),
            status.stderr
        )
    }

    func testWithoutAReaderAutoFallsBackToTheSimulatorInUserMode() throws {
        let dir = directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A bus address nobody listens on: fprintd cannot be asked, so `auto` falls back.
        let daemon = try DaemonLauncher.spawn(
            productPath("laenclaved"),
            [
                "--user", "--socket", dir + "/run/socket", "--state-dir", dir + "/state",
                "--key-file", dir + "/keys/master.key", "--config", dir + "/none.conf",
                "--passcode-cost", "10", "--exit-with-parent", "--log-file", dir + "/log",
            ],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(dir)/no-bus"]
        )
        defer { terminateAndWait(daemon) }
        eventually("the daemon's socket") { FileManager.default.fileExists(atPath: dir + "/run/socket") }
        let status = try runProcess(productPath("lactl"), ["status", "--socket", dir + "/run/socket"])
        XCTAssertTrue(status.stdout.contains("Simulated Touch ID"), status.stdout)
        XCTAssertTrue(
            (try? String(contentsOfFile: dir + "/log", encoding: .utf8))?.contains(
                "no fingerprint reader through fprintd"
            ) ?? false
        )
    }

    func testTheCommandLineOverridesTheFilesSensorWithNone() throws {
        let dir = directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "sensor = simulated-faceid\n".write(toFile: dir + "/laenclaved.conf", atomically: true, encoding: .utf8)
        let daemon = try DaemonLauncher.spawn(
            productPath("laenclaved"),
            [
                "--user", "--socket", dir + "/run/socket", "--state-dir", dir + "/state",
                "--key-file", dir + "/keys/master.key", "--config", dir + "/laenclaved.conf",
                "--simulated-sensor", "none", "--passcode-cost", "10", "--exit-with-parent",
            ]
        )
        defer { terminateAndWait(daemon) }
        eventually("the daemon's socket") { FileManager.default.fileExists(atPath: dir + "/run/socket") }
        let status = try runProcess(productPath("lactl"), ["status", "--json", "--socket", dir + "/run/socket"])
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertFalse(status.stdout.contains("Face ID"), status.stdout)
        XCTAssertFalse(status.stdout.contains("\"sensor\" : {"), "no sensor at all: \(status.stdout)")
    }
}
