import EnclaveCore
import Foundation
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
        XCTAssertNil(s.tpm, "auto")
        XCTAssertNil(s.requireTPM)
        XCTAssertNil(s.moveToTPM)
        XCTAssertNil(s.handoff, "always")
    }

    func testEveryKeyWithCommentsAndSpaces() throws {
        let s = try DaemonSettings.parse(
            """
            # a comment
            sensor = fprintd          # trailing comment
              passcode-source=pam
            pam-service = login
            pam-users = alice, bob ,carol

            allow-simulation = yes
            prompt-agent = /opt/la/laenclaved-agent
            administration-pipe = yes
            tpm = swtpm:host=127.0.0.1,port=2321
            require-tpm = yes
            move-to-tpm = yes
            handoff = if-kernel-refuses
            """
        )
        XCTAssertEqual(s.handoff, .ifKernelRefuses)
        XCTAssertEqual(s.tpm, .tcti("swtpm:host=127.0.0.1,port=2321"))
        XCTAssertEqual(s.requireTPM, true)
        XCTAssertEqual(s.moveToTPM, true)
        XCTAssertEqual(s.sensor, .fprintd)
        XCTAssertEqual(s.passcodeSource, .pam)
        XCTAssertEqual(s.pamService, "login")
        XCTAssertEqual(s.pamUsers, ["alice", "bob", "carol"])
        XCTAssertEqual(s.allowSimulation, true)
        XCTAssertEqual(s.promptAgent, "/opt/la/laenclaved-agent")
        XCTAssertEqual(s.administrationPipe, true)
        XCTAssertEqual(try DaemonSettings.parse("prompt-agent = none").promptAgent, "", "none: no agent")
    }

    func testMistakesNameTheirLine() {
        for (text, line, fragment) in [
            ("sensor = fingerprint", 1, "sensor is one of"),
            ("\npasscode-source = ldap", 2, "passcode-source is one of"),
            ("allow-simulation = maybe", 1, "yes or no"),
            ("administration-pipe = sometimes", 1, "administration-pipe is yes or no"),
            ("pam-service = ../shadow", 1, "/etc/pam.d"),
            ("pam-users = ,", 1, "user names"),
            ("sensr = auto", 1, "unknown setting"),
            ("prompt-agent = laenclaved-agent", 1, "absolute path"),
            ("prompt-agent = /usr/bin/", 1, "absolute path"),
            ("just words", 1, "key = value"),
            ("tpm = on", 1, "tpm is auto, off, or a TPM"),
            ("require-tpm = please", 1, "require-tpm is yes or no"),
            ("handoff = off", 1, "handoff is one of always, if-kernel-refuses, root, never"),
        ] {
            XCTAssertThrowsError(try DaemonSettings.parse(text), text) { error in
                guard let e = error as? CoreError, e.code == .settings else { return XCTFail("\(error)") }
                XCTAssertEqual(e.line, line, text)
                XCTAssertTrue(e.message.contains(fragment), "\(text): \(e.message)")
            }
        }
    }

    func testAMissingFileMeansTheDefaults() throws {
        XCTAssertEqual(try DaemonSettings.load("/nonexistent/laenclaved.conf"), DaemonSettings())
        XCTAssertEqual(try DaemonSettings.read("/nonexistent/laenclaved.conf").onlyRootWrites, false)
    }

    /// What only root may choose is read with the file's owner and mode, from the same open file.
    func testAFileIsOnlyRootsWhenRootOwnsItAndNobodyElseMayWrite() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root, to own a file as root and as another user") }
        let path = NSTemporaryDirectory() + "la-settings-\(UInt32.random(in: 0...UInt32.max)).conf"
        defer { unlink(path) }
        try "administration-pipe = yes\n".write(toFile: path, atomically: false, encoding: .utf8)
        for (mode, owner, expected) in [
            (0o644, 0, true), (0o600, 0, true), (0o664, 0, false), (0o646, 0, false), (0o644, 65534, false),
        ] as [(mode_t, uid_t, Bool)] {
            XCTAssertEqual(chown(path, owner, 0), 0)
            XCTAssertEqual(chmod(path, mode), 0)
            let file = try DaemonSettings.read(path)
            XCTAssertEqual(file.settings.administrationPipe, true)
            XCTAssertEqual(file.onlyRootWrites, expected, "mode \(String(mode, radix: 8)), owner \(owner)")
        }
        // A FIFO at the path neither blocks the start nor counts as a file.
        let fifo = path + ".fifo"
        defer { unlink(fifo) }
        XCTAssertEqual(mkfifo(fifo, 0o644), 0)
        XCTAssertThrowsError(try DaemonSettings.read(fifo)) {
            XCTAssertTrue("\($0)".contains("not a regular file"), "\($0)")
        }
    }
}
