import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The passcode counter guards against guessing only if the guesser cannot lift it. A user-mode
/// daemon run by an ordinary user (a throw-away one, with a login password), attacked by an app of
/// that user: five wrong guesses start a delay, the app asks for the reset, and guesses on. Before,
/// any client of a user daemon could reset, so guessing was free (the issue found a 4-digit
/// passcode after 47–134 guesses); now root may, and the person with the login password — which
/// no app is told, whose wrong guesses count and wait on their own — and the delay holds.
final class PasscodeLockoutAttackTests: XCTestCase {
    private var user = ""
    private let password = "Login-Pa55-\(UInt32.random(in: 100_000...999_999))"
    private var service = ""
    private var dir = ""
    private var daemon: pid_t = 0

    override func setUpWithError() throws {
        let security = ["/usr/lib/x86_64-linux-gnu/security", "/lib/x86_64-linux-gnu/security"]
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            FileManager.default.isExecutableFile(atPath: "/usr/sbin/useradd"),
            FileManager.default.isExecutableFile(atPath: "/usr/sbin/chpasswd"),
            security.contains(where: { FileManager.default.fileExists(atPath: "\($0)/pam_unix.so") })
        else {
            throw XCTSkip("needs root, setpriv(1), useradd, chpasswd and pam_unix to run a user daemon as another user")
        }
        let suffix = String(UInt32.random(in: 100_000...999_999))
        user = "lalock\(suffix)"
        service = "laenclaved-lockout-\(suffix)"
        XCTAssertEqual(try runProcess("/usr/sbin/useradd", ["-M", "-s", "/usr/sbin/nologin", user]).status, 0)
        XCTAssertEqual(try runProcess("/usr/sbin/chpasswd", [], input: "\(user):\(password)\n").status, 0)
        // Password-only, without pam_unix's failure delay (the daemon's own delays are the subject).
        try "auth required pam_unix.so nodelay\naccount required pam_unix.so\n".write(
            toFile: "/etc/pam.d/\(service)",
            atomically: true,
            encoding: .utf8
        )
        var template = Array("/tmp/la-lockout-XXXXXX".utf8CString)
        dir = String(cString: mkdtemp(&template)!)
        // The binaries are copied where the user can run them, whatever the checkout's permissions.
        try FileManager.default.createDirectory(atPath: dir + "/bin", withIntermediateDirectories: false)
        for tool in ["laenclaved", "lactl"] {
            try FileManager.default.copyItem(atPath: productPath(tool), toPath: "\(dir)/bin/\(tool)")
        }
        XCTAssertEqual(chmod(dir + "/bin", 0o755), 0)
        let (uid, gid) = try ids()
        XCTAssertEqual(chown(dir, uid, gid), 0)
        daemon = try DaemonLauncher.spawn(
            "/usr/bin/setpriv",
            asUser + [
                "\(dir)/bin/laenclaved", "--user", "--socket", "\(dir)/run/socket", "--state-dir", "\(dir)/state",
                "--key-file", "\(dir)/keys/master.key", "--config", "\(dir)/none.conf", "--simulated-sensor", "none",
                "--pam-service", service, "--passcode-cost", "10", "--log-file", "\(dir)/log", "--exit-with-parent",
                // Its guesses come through a pipe: this daemon is the test's, and its starter allows it.
                "--administration-pipe",
            ]
        )
        eventually("the user daemon's socket") { FileManager.default.fileExists(atPath: "\(dir)/run/socket") }
        let set = try lactl(["passcode", "set", "--stdin"], input: "123456\n")
        XCTAssertEqual(set.status, 0, set.stderr + log())
    }

    override func tearDown() {
        if daemon > 0 { terminateAndWait(daemon) }
        if !dir.isEmpty { try? FileManager.default.removeItem(atPath: dir) }
        if !service.isEmpty { unlink("/etc/pam.d/\(service)") }
        if !user.isEmpty { _ = try? runProcess("/usr/sbin/userdel", [user]) }
    }

    private func ids() throws -> (uid_t, gid_t) {
        guard let entry = getpwnam(user) else { throw XCTSkip("no user \(user)") }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }

    func testAnAppOfTheUserCannotLiftThePasscodeCounter() throws {
        // Each guess a different wrong passcode: a repeated one counts once.
        for guess in 0..<5 {
            let wrong = try guessing(String(format: "%04d", 9000 + guess))
            XCTAssertTrue(wrong.stderr.contains("not correct"), "guess \(guess): \(wrong.stderr)")
        }
        XCTAssertTrue(try guessing("9005").stderr.contains("delayed"), "five failures start the delay")

        // The app asks on its own (no terminal, no pipe: the request goes, and the daemon, with
        // nobody to ask, refuses it), then with a guessed login password.
        let reset = try lactl(["admin", "reset-passcode"])
        XCTAssertNotEqual(reset.status, 0, "an app of the user lifted the passcode counter")
        XCTAssertTrue(reset.stderr.contains("this needs the person"), reset.stderr)
        let guessed = try lactl(["admin", "reset-passcode", "--stdin"], input: "123456\n")
        XCTAssertNotEqual(guessed.status, 0, "a passcode guess lifted the passcode counter")
        XCTAssertTrue(guessed.stderr.contains("login password is not correct"), guessed.stderr)
        XCTAssertTrue(
            try guessing("9006").stderr.contains("delayed"),
            "the delay still holds after the attempted reset"
        )

        // The administrator can: root reaches the user's daemon for this one request.
        let root = try runProcess("\(dir)/bin/lactl", ["admin", "reset-passcode", "--socket", "\(dir)/run/socket"])
        XCTAssertEqual(root.status, 0, root.stderr + log())
        let right = try guessing("123456")
        XCTAssertEqual(right.status, 0, right.stderr)
    }

    /// The person lifts it with the login password; its wrong guesses count on their own, are
    /// stored, and from the fifth wait as the passcode's do — the right one included.
    func testThePersonLiftsItWithTheLoginPasswordAndGuessesAtThatAreDelayed() throws {
        for guess in 0..<5 { _ = try guessing(String(format: "%04d", 8000 + guess)) }
        XCTAssertTrue(try guessing("8005").stderr.contains("delayed"))
        let wrong = try lactl(["admin", "reset-passcode", "--stdin"], input: "not-the-password\n")
        XCTAssertTrue(wrong.stderr.contains("(1 in a row)"), wrong.stderr)
        let lifted = try lactl(["admin", "reset-passcode", "--stdin"], input: password + "\n")
        XCTAssertEqual(lifted.status, 0, lifted.stderr + log())
        XCTAssertEqual(try guessing("123456").status, 0, "the passcode works again at once")

        for n in 1...5 {
            let again = try lactl(["admin", "reset-passcode", "--stdin"], input: "guess-\(n)\n")
            XCTAssertTrue(again.stderr.contains("(\(n) in a row)"), "guess \(n): \(again.stderr)")
        }
        let delayed = try lactl(["admin", "reset-passcode", "--stdin"], input: password + "\n")
        XCTAssertNotEqual(delayed.status, 0, "the right password is not checked during the delay")
        XCTAssertTrue(delayed.stderr.contains("delayed"), delayed.stderr)
        // The count is durable: a restarted daemon still delays.
        terminateAndWait(daemon)
        daemon = try DaemonLauncher.spawn(
            "/usr/bin/setpriv",
            asUser + [
                "\(dir)/bin/laenclaved", "--user", "--socket", "\(dir)/run/socket", "--state-dir", "\(dir)/state",
                "--key-file", "\(dir)/keys/master.key", "--config", "\(dir)/none.conf", "--simulated-sensor", "none",
                "--pam-service", service, "--passcode-cost", "10", "--log-file", "\(dir)/log", "--exit-with-parent",
                // Its guesses come through a pipe: this daemon is the test's, and its starter allows it.
                "--administration-pipe",
            ]
        )
        eventually("the user daemon's socket") {
            (try? RawClient(path: "\(dir)/run/socket")).map {
                $0.close()
                return true
            } ?? false
        }
        XCTAssertTrue(
            try lactl(["admin", "reset-passcode", "--stdin"], input: password + "\n").stderr.contains("delayed")
        )
        XCTAssertFalse(log().contains(password), "the login password never reaches the log")
    }

    /// Where the passcode is the login password (PAM), lifting its counter with the login password
    /// would be a second counter on the same secret: refused, root lifts it.
    func testWhereThePasscodeIsTheLoginPasswordOnlyRootLiftsIt() throws {
        terminateAndWait(daemon)
        daemon = try DaemonLauncher.spawn(
            "/usr/bin/setpriv",
            asUser + [
                "\(dir)/bin/laenclaved", "--user", "--socket", "\(dir)/run/socket", "--state-dir", "\(dir)/state",
                "--key-file", "\(dir)/keys/master.key", "--config", "\(dir)/none.conf", "--simulated-sensor", "none",
                "--passcode-source", "pam", "--pam-service", service, "--log-file", "\(dir)/log", "--exit-with-parent",
                "--administration-pipe",
            ]
        )
        eventually("the user daemon's socket") {
            (try? RawClient(path: "\(dir)/run/socket")).map {
                $0.close()
                return true
            } ?? false
        }
        let lift = try lactl(["admin", "reset-passcode", "--stdin"], input: password + "\n")
        XCTAssertNotEqual(lift.status, 0, "the login password lifted the counter of the login password")
        XCTAssertTrue(lift.stderr.contains("lifted by root"), lift.stderr)
    }

    /// Root is let in to lift the counter, and for nothing else: the rest is the user's.
    func testRootReachesAUsersDaemonForNothingElse() throws {
        let client = try RawClient(path: "\(dir)/run/socket")
        defer { client.close() }
        client.sendRequest(id: 1, op: "hello", args: ["version": enclaveProtocolVersion])
        XCTAssertEqual((try client.readReply()?["reply"] as? [String: Any])?["kind"] as? String, "hello")
        let requests: [(String, [String: Any]?)] = [
            ("status", nil), ("audit", ["limit": 10, "passcode": "123456"]), ("keychainList", ["passcode": "123456"]),
            ("simulate", ["events": [["kind": "match"]]]), ("remoteLock", nil),
        ]
        for (n, (op, args)) in requests.enumerated() {
            let id = UInt64(n + 2)
            client.sendRequest(id: id, op: op, args: args)
            let reply = try client.readReply()
            let body = reply?["reply"] as? [String: Any]
            XCTAssertEqual(body?["kind"] as? String, "failure", "\(op): \(String(describing: reply))")
            XCTAssertEqual(
                (body?["value"] as? [String: Any])?["code"] as? String,
                FailureCode.notPermitted.rawValue,
                "\(op): \(String(describing: reply))"
            )
        }
    }

    private var asUser: [String] {
        let (uid, gid) = (try? ids()) ?? (65534, 65534)
        return ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--"]
    }

    /// A guess, as any app would make one: the passcode that opens the user's full audit log.
    private func guessing(_ passcode: String) throws -> ProcessOutput {
        try lactl(["audit", "--all", "--stdin"], input: passcode + "\n")
    }

    private func lactl(_ arguments: [String], input: String = "") throws -> ProcessOutput {
        try runProcess(
            "/usr/bin/setpriv",
            asUser + ["\(dir)/bin/lactl"] + arguments + ["--socket", "\(dir)/run/socket"],
            input: input,
            environment: ["PATH": "/usr/bin:/bin", "HOME": dir]
        )
    }

    private func log() -> String { (try? String(contentsOfFile: "\(dir)/log", encoding: .utf8)) ?? "" }
}
