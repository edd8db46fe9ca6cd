import EnclaveClient
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// User mode: the first client starts the daemon when no socket answers, detached from the client,
/// with its socket under $XDG_RUNTIME_DIR and its state under $XDG_DATA_HOME.
final class AutostartTests: XCTestCase {
    /// A throw-away home with an empty runtime directory; no daemon serves it yet.
    private func home() throws -> String {
        var template = Array("/tmp/la-autostart-XXXXXX".utf8CString)
        let root = String(cString: mkdtemp(&template)!)
        return root
    }

    /// Stops the daemon the test started there and removes the home.
    private func forget(_ root: String) {
        _ = try? runProcess("/usr/bin/pkill", ["-f", root + "/runtime"])
        try? FileManager.default.removeItem(atPath: root)
    }

    func testTheFirstClientStartsTheUserDaemon() throws {
        let root = try home()
        defer { forget(root) }
        let env = [
            "PATH": "/usr/bin:/bin", "HOME": root, "XDG_RUNTIME_DIR": root + "/runtime",
            "XDG_DATA_HOME": root + "/data",
            "LAENCLAVED_PATH": productPath("laenclaved"),
        ]
        let first = try runProcess(productPath("lactl"), ["status", "--json"], environment: env)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertTrue(first.stdout.contains("\"mode\" : \"user\""), first.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: root + "/runtime/laenclaved/socket"))
        XCTAssertTrue(FileManager.default.fileExists(atPath: root + "/data/laenclaved/enclave.sqlite"))
        var st = stat()
        stat(root + "/data/laenclaved", &st)
        XCTAssertEqual(st.st_mode & 0o777, 0o700)
        stat(root + "/runtime/laenclaved", &st)
        XCTAssertEqual(st.st_mode & 0o777, 0o700)
        // The daemon outlived the client that started it; a second client finds it.
        XCTAssertEqual(
            try runProcess(productPath("lactl"), ["passcode", "set", "--stdin"], input: "432100\n", environment: env)
                .status,
            0
        )
        let second = try runProcess(productPath("lactl"), ["status", "--json"], environment: env)
        XCTAssertTrue(second.stdout.contains("\"passcodeSet\" : true"), second.stdout)
        let log = (try? String(contentsOfFile: root + "/data/laenclaved/laenclaved.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(log.contains("listening"), log)
        XCTAssertFalse(log.contains("432100"), "the passcode never reaches the log")
    }

    /// Attack: the app that happens to connect first chooses the daemon's environment — a library
    /// to preload, a locale, its secrets. The daemon gets only what it needs.
    func testTheUserDaemonStartsWithACleanEnvironment() throws {
        let root = try home()
        defer { forget(root) }
        let env = [
            "PATH": "/usr/bin:/bin", "HOME": root, "XDG_RUNTIME_DIR": root + "/runtime",
            "XDG_DATA_HOME": root + "/data",
            "LAENCLAVED_PATH": productPath("laenclaved"), "APP_SECRET_TOKEN": "hunter2", "LD_PRELOAD": "",
            "MALLOC_CHECK_": "3",
        ]
        XCTAssertEqual(try runProcess(productPath("lactl"), ["status"], environment: env).status, 0)
        let found = try runProcess("/usr/bin/pgrep", ["-f", root + "/runtime/laenclaved/socket"])
        let pid = try XCTUnwrap(found.stdout.split(separator: "\n").first.map(String.init), "the daemon runs")
        let environ = try String(
            decoding: Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ")),
            as: UTF8.self
        )
        let names = Set(
            environ.split(separator: "\0").compactMap { $0.split(separator: "=", maxSplits: 1).first.map(String.init) }
        )
        XCTAssertFalse(names.contains("APP_SECRET_TOKEN"), "\(names.sorted())")
        XCTAssertFalse(names.contains("LD_PRELOAD"), "\(names.sorted())")
        XCTAssertFalse(names.contains("MALLOC_CHECK_"), "\(names.sorted())")
        XCTAssertTrue(
            names.isSubset(of: DaemonLauncher.inheritedEnvironment),
            "only what the daemon needs: \(names.sorted())"
        )
        XCTAssertTrue(environ.contains("XDG_DATA_HOME=\(root)/data"), "where its state lives still reaches it")
    }

    /// Attack: whoever sets the first app's environment, or puts a `laenclaved` beside an app, chose
    /// the program every app of the user then trusts with its passcode and secrets. Only an
    /// installed program (root's, writable by root alone, in root's directories) is started.
    func testOnlyAnInstalledDaemonIsStarted() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to act as another user") }
        let root = try home()
        defer { forget(root) }
        let nobody: uid_t = 65534
        for dir in ["", "/bin", "/runtime", "/data"] {
            try FileManager.default.createDirectory(atPath: root + dir, withIntermediateDirectories: true)
            chown(root + dir, nobody, nobody)
            chmod(root + dir, 0o755)
        }
        // A program of the attacker's, where the environment and the app's own directory point.
        let fake = root + "/bin/laenclaved"
        try "#!/bin/sh\ntouch \(root)/started-the-fake\n".write(toFile: fake, atomically: true, encoding: .utf8)
        chown(fake, nobody, nobody)
        chmod(fake, 0o755)
        let lactl = root + "/bin/lactl"
        try FileManager.default.copyItem(atPath: productPath("lactl"), toPath: lactl)
        chmod(lactl, 0o755)
        let common = [
            "HOME=\(root)", "XDG_RUNTIME_DIR=\(root)/runtime", "XDG_DATA_HOME=\(root)/data", "PATH=/usr/bin:/bin",
        ]
        for (name, environment) in [
            ("LAENCLAVED_PATH", common + ["LAENCLAVED_PATH=\(fake)"]), ("beside the app", common),
        ] {
            try? FileManager.default.removeItem(atPath: root + "/started-the-fake")
            let run = try runProcess(
                "/usr/sbin/runuser",
                ["-u", "nobody", "--", "/usr/bin/env", "-i"] + environment + [lactl, "status"]
            )
            XCTAssertFalse(
                FileManager.default.fileExists(atPath: root + "/started-the-fake"),
                "\(name): the attacker's program was started"
            )
            XCTAssertNotEqual(run.status, 0, name)
            XCTAssertTrue(run.stderr.contains("installed"), "\(name): \(run.stderr)")
        }
    }

    /// Attack: without $XDG_RUNTIME_DIR the socket's directory was /tmp/laenclaved-UID, which any
    /// other user can create first: the daemon (rightly) refuses to listen there, so the user had
    /// no daemon at all. The socket now lives where only the user can create it.
    func testAnotherUserCannotTakeTheSocketDirectoryFirst() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to act as another user") }
        let squatted = "/tmp/laenclaved-\(getuid())"
        if FileManager.default.fileExists(atPath: squatted) { throw XCTSkip("\(squatted) exists on this machine") }
        let root = try home()
        defer {
            forget(root)
            try? FileManager.default.removeItem(atPath: squatted)
        }
        try FileManager.default.createDirectory(atPath: squatted, withIntermediateDirectories: false)
        chown(squatted, 65534, 65534)
        chmod(squatted, 0o777)
        // No XDG_RUNTIME_DIR, as in an ssh or cron session without logind.
        let env = [
            "PATH": "/usr/bin:/bin", "HOME": root, "XDG_DATA_HOME": root + "/data",
            "LAENCLAVED_PATH": productPath("laenclaved"),
        ]
        let run = try runProcess(productPath("lactl"), ["status", "--json"], environment: env)
        XCTAssertEqual(run.status, 0, "the user gets a daemon though another user squats /tmp: \(run.stderr)")
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: squatted),
            [],
            "nothing of the user's went into the squatted directory"
        )
        _ = try? runProcess("/usr/bin/pkill", ["-f", root + "/data"])
    }

    /// Attack: the check looked through a link it did not own, then the daemon was started by the
    /// link's name — which its owner could re-point at another program in between. The program
    /// started must be named by the path that was checked.
    func testTheDaemonIsStartedByThePathThatWasChecked() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to act as another user") }
        let root = try home()
        defer { forget(root) }
        try FileManager.default.createDirectory(atPath: root + "/links", withIntermediateDirectories: true)
        chown(root + "/links", 65534, 65534)
        let link = root + "/links/laenclaved"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: productPath("laenclaved"))
        lchown(link, 65534, 65534)
        let env = [
            "PATH": "/usr/bin:/bin", "HOME": root, "XDG_RUNTIME_DIR": root + "/runtime",
            "XDG_DATA_HOME": root + "/data",
            "LAENCLAVED_PATH": link,
        ]
        let run = try runProcess(productPath("lactl"), ["status"], environment: env)
        XCTAssertEqual(run.status, 0, run.stderr)
        let found = try runProcess("/usr/bin/pgrep", ["-f", root + "/runtime/laenclaved/socket"])
        let pid = try XCTUnwrap(found.stdout.split(separator: "\n").first.map(String.init), "the daemon runs")
        let cmdline = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))
        let program = String(decoding: cmdline.split(separator: 0).first ?? Data(), as: UTF8.self)
        XCTAssertEqual(
            program,
            URL(fileURLWithPath: productPath("laenclaved")).resolvingSymlinksInPath().path,
            "started by the resolved, checked path, not by the link another user controls"
        )
    }
}
