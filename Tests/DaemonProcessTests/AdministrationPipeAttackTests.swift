import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Administration only on the person's trusted path (issue 33): an app of an ordinary user that
/// learned the device passcode once (its own fake prompt, a shoulder-surfed code) hands the
/// user's daemon a pipe it writes the passcode into, as `lactl … --stdin` does. Before, that read
/// every app's audit, listed every app's items and joined their access groups; now the pipe gives
/// the passcode only where root (or the daemon's starter) allowed it.
final class AdministrationPipeAttackTests: XCTestCase {
    private var user = ""
    private var dir = ""
    private var daemon: pid_t = 0
    private let passcode = "135790"

    override func setUpWithError() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            FileManager.default.isExecutableFile(atPath: "/usr/sbin/useradd")
        else { throw XCTSkip("needs root, setpriv(1) and useradd to run a user daemon as another user") }
        user = "lapipe\(UInt32.random(in: 100_000...999_999))"
        XCTAssertEqual(try runProcess("/usr/sbin/useradd", ["-M", "-s", "/usr/sbin/nologin", user]).status, 0)
        var template = Array("/tmp/la-pipe-XXXXXX".utf8CString)
        dir = String(cString: mkdtemp(&template)!)
        try FileManager.default.createDirectory(atPath: dir + "/bin", withIntermediateDirectories: false)
        for (tool, name) in [("laenclaved", "laenclaved"), ("lactl", "lactl"), ("lactl", "some-app")] {
            try FileManager.default.copyItem(atPath: productPath(tool), toPath: "\(dir)/bin/\(name)")
        }
        XCTAssertEqual(chmod(dir + "/bin", 0o755), 0)
        let (uid, gid) = try ids()
        XCTAssertEqual(chown(dir, uid, gid), 0)
        // The user's own configuration file says yes: any app of the user could have written it.
        try "administration-pipe = yes\n".write(toFile: dir + "/user.conf", atomically: false, encoding: .utf8)
        XCTAssertEqual(chown(dir + "/user.conf", uid, gid), 0)
        try "administration-pipe = yes\n".write(toFile: dir + "/root.conf", atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(dir + "/root.conf", 0o644), 0)

        // Provisioning: the daemon's starter allows the pipe; the passcode is set, and another app
        // (the real lactl) leaves its entries in the audit log.
        try startDaemon(["--config", dir + "/none.conf", "--administration-pipe"])
        let set = try run("lactl", ["passcode", "set", "--stdin"], input: passcode + "\n")
        XCTAssertEqual(set.status, 0, set.stderr + log())
        terminateAndWait(daemon)
        daemon = 0
    }

    override func tearDown() {
        if daemon > 0 { terminateAndWait(daemon) }
        if !dir.isEmpty { try? FileManager.default.removeItem(atPath: dir) }
        if !user.isEmpty { _ = try? runProcess("/usr/sbin/userdel", [user]) }
    }

    func testAnAppThatKnowsThePasscodeAdministersNothingThroughAPipe() throws {
        try startDaemon(["--config", dir + "/user.conf"])
        XCTAssertTrue(
            log().contains("administration-pipe is ignored"),
            "the user's file cannot allow it, and the log says so: \(log())"
        )
        for (tool, arguments) in [
            ("some-app", ["audit", "--all", "--stdin"]), ("some-app", ["keychain", "list", "--stdin"]),
            ("some-app", ["keychain", "share", "everyone", dir + "/bin/some-app", "--stdin"]),
            // The app runs the real lactl itself: the daemon cannot tell who wrote into the pipe.
            ("lactl", ["audit", "--all", "--stdin"]), ("lactl", ["passcode", "change", "--stdin"]),
        ] {
            let attempt = try run(tool, arguments, input: passcode + "\n" + "246802\n")
            XCTAssertNotEqual(attempt.status, 0, "\(tool) \(arguments): the pipe administered: \(attempt.stdout)")
            XCTAssertTrue(
                attempt.stderr.contains("only where root allowed it"),
                "\(tool) \(arguments): \(attempt.stderr)"
            )
            XCTAssertTrue(
                attempt.stderr.contains("in your own terminal"),
                "the refusal says what to do: \(attempt.stderr)"
            )
        }
        XCTAssertFalse(log().contains(passcode), "the passcode never reaches the log")
    }

    /// Provisioning where root allowed it still works: a system daemon whose configuration file
    /// only root can write says yes, and the user's lactl provisions through a pipe.
    func testRootsSettingAllowsProvisioningThroughAPipe() throws {
        // A system daemon's socket lives in a directory root owns.
        let socket = "\(dir)/system-run/socket"
        daemon = try DaemonLauncher.spawn(
            productPath("laenclaved"),
            [
                "--system", "--socket", socket, "--state-dir", "\(dir)/system-state", "--key-file",
                "\(dir)/system-keys/master.key",
                "--config", dir + "/root.conf", "--simulated-sensor", "none", "--passcode-cost", "10", "--log-file",
                "\(dir)/log", "--exit-with-parent", "--tpm", "off",
            ]
        )
        eventually("the system daemon's socket") {
            (try? RawClient(path: socket)).map {
                $0.close()
                return true
            } ?? false
        }
        let set = try run("lactl", ["passcode", "set", "--stdin"], input: passcode + "\n", socket: socket)
        XCTAssertEqual(set.status, 0, set.stderr + log())
        let list = try run("lactl", ["audit", "--all", "--stdin"], input: passcode + "\n", socket: socket)
        XCTAssertEqual(list.status, 0, list.stderr + log())
        XCTAssertTrue(list.stdout.contains("passcode.set"), list.stdout)
    }

    private func startDaemon(_ extra: [String]) throws {
        let (uid, gid) = try ids()
        daemon = try DaemonLauncher.spawn(
            "/usr/bin/setpriv",
            [
                "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--",
                "\(dir)/bin/laenclaved", "--user", "--socket", "\(dir)/run/socket", "--state-dir", "\(dir)/state",
                "--key-file", "\(dir)/keys/master.key",
                "--simulated-sensor", "none", "--passcode-cost", "10", "--log-file", "\(dir)/log", "--exit-with-parent",
            ] + extra
        )
        eventually("the user daemon's socket") {
            (try? RawClient(path: "\(dir)/run/socket")).map {
                $0.close()
                return true
            } ?? false
        }
    }

    private func ids() throws -> (uid_t, gid_t) {
        guard let entry = getpwnam(user) else { throw XCTSkip("no user \(user)") }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }

    /// A program of the user, run as an app would run it: no terminal, input from a pipe.
    private func run(
        _ tool: String,
        _ arguments: [String],
        input: String,
        socket: String? = nil
    ) throws -> ProcessOutput {
        let (uid, gid) = try ids()
        return try runProcess(
            "/usr/bin/setpriv",
            ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--", "\(dir)/bin/\(tool)"] + arguments
                + ["--socket", socket ?? "\(dir)/run/socket"],
            input: input,
            environment: ["PATH": "/usr/bin:/bin", "HOME": dir]
        )
    }

    private func log() -> String { (try? String(contentsOfFile: "\(dir)/log", encoding: .utf8)) ?? "" }
}
