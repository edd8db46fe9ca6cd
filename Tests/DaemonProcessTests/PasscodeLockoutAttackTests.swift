import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The passcode counter guards against guessing only if the guesser cannot lift it. A user-mode
/// daemon run by an ordinary user (nobody here), attacked by an app of that user: five wrong
/// guesses start a delay, the app asks for the reset, and guesses on. Before, any client of a
/// user daemon could reset, so guessing was free (the issue found a 4-digit passcode after 47–134
/// guesses); now only root may, and the delay holds.
final class PasscodeLockoutAttackTests: XCTestCase {
    private let nobody: UInt32 = 65534
    private var dir = ""
    private var daemon: pid_t = 0

    override func setUpWithError() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            throw XCTSkip("needs root and setpriv(1) to run a user daemon as another user")
        }
        var template = Array("/tmp/la-lockout-XXXXXX".utf8CString)
        dir = String(cString: mkdtemp(&template)!)
        // The binaries are copied where nobody can run them, whatever the checkout's permissions.
        try FileManager.default.createDirectory(atPath: dir + "/bin", withIntermediateDirectories: false)
        for tool in ["laenclaved", "lactl"] {
            try FileManager.default.copyItem(atPath: productPath(tool), toPath: "\(dir)/bin/\(tool)")
        }
        XCTAssertEqual(chmod(dir + "/bin", 0o755), 0)
        XCTAssertEqual(chown(dir, nobody, nobody), 0)
        daemon = try DaemonLauncher.spawn("/usr/bin/setpriv", asNobody + [
            "\(dir)/bin/laenclaved", "--user", "--socket", "\(dir)/run/socket", "--state-dir", "\(dir)/state",
            "--key-file", "\(dir)/keys/master.key", "--config", "\(dir)/none.conf", "--simulated-sensor", "none",
            "--passcode-cost", "10", "--log-file", "\(dir)/log", "--exit-with-parent"])
        eventually("the user daemon's socket") { FileManager.default.fileExists(atPath: "\(dir)/run/socket") }
        let set = try lactl(["passcode", "set", "--stdin"], input: "123456\n")
        XCTAssertEqual(set.status, 0, set.stderr + log())
    }

    override func tearDown() {
        if daemon > 0 { terminateAndWait(daemon) }
        if !dir.isEmpty { try? FileManager.default.removeItem(atPath: dir) }
    }

    func testAnAppOfTheUserCannotLiftThePasscodeCounter() throws {
        // Each guess a different wrong passcode: a repeated one counts once.
        for guess in 0..<5 {
            let wrong = try guessing(String(format: "%04d", 9000 + guess))
            XCTAssertTrue(wrong.stderr.contains("not correct"), "guess \(guess): \(wrong.stderr)")
        }
        XCTAssertTrue(try guessing("9005").stderr.contains("delayed"), "five failures start the delay")

        let reset = try lactl(["admin", "reset-passcode"])
        XCTAssertNotEqual(reset.status, 0, "an app of the user lifted the passcode counter")
        XCTAssertTrue(reset.stderr.contains("only root"), reset.stderr)
        XCTAssertTrue(try guessing("9006").stderr.contains("delayed"), "the delay still holds after the attempted reset")

        // The administrator can: root reaches the user's daemon for this one request.
        let root = try runProcess("\(dir)/bin/lactl", ["admin", "reset-passcode", "--socket", "\(dir)/run/socket"])
        XCTAssertEqual(root.status, 0, root.stderr + log())
        let right = try guessing("123456")
        XCTAssertEqual(right.status, 0, right.stderr)
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
            XCTAssertEqual((body?["value"] as? [String: Any])?["code"] as? String, FailureCode.notPermitted.rawValue, "\(op): \(String(describing: reply))")
        }
    }

    private var asNobody: [String] { ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "--"] }

    /// A guess, as any app would make one: the passcode that opens the user's full audit log.
    private func guessing(_ passcode: String) throws -> ProcessOutput {
        try lactl(["audit", "--all", "--stdin"], input: passcode + "\n")
    }

    private func lactl(_ arguments: [String], input: String = "") throws -> ProcessOutput {
        try runProcess("/usr/bin/setpriv", asNobody + ["\(dir)/bin/lactl"] + arguments + ["--socket", "\(dir)/run/socket"],
                       input: input, environment: ["PATH": "/usr/bin:/bin", "HOME": dir])
    }

    private func log() -> String { (try? String(contentsOfFile: "\(dir)/log", encoding: .utf8)) ?? "" }
}
