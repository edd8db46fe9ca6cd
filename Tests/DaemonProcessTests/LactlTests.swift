import EnclaveClient
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

/// lactl as a shell script uses it.
final class LactlTests: XCTestCase {
    func testAuthenticateExitStatusAndJSON() throws {
        let enclave = try TestEnclave()
        let lactl = productPath("lactl")
        try enclave.queue(.match)
        let ok = try runProcess(
            lactl,
            ["authenticate", "--socket", enclave.socketPath, "--policy", "biometrics", "--reason", "Deploy", "--json"]
        )
        XCTAssertEqual(ok.status, 0, ok.stderr)
        let json = try JSONSerialization.jsonObject(with: Data(ok.stdout.utf8)) as! [String: Any]
        XCTAssertEqual(json["success"] as? Bool, true)

        try enclave.queue(.cancel)
        let cancelled = try runProcess(
            lactl,
            ["authenticate", "--socket", enclave.socketPath, "--reason", "Deploy", "--json"]
        )
        XCTAssertEqual(cancelled.status, 12, "10 + |userCancel (-2)|")
        let j = try JSONSerialization.jsonObject(with: Data(cancelled.stdout.utf8)) as! [String: Any]
        XCTAssertEqual(j["code"] as? Int, -2)
        XCTAssertEqual(j["name"] as? String, "userCancel")

        let quiet = try runProcess(
            lactl,
            ["authenticate", "--socket", enclave.socketPath, "--reason", "Deploy", "--no-interaction"]
        )
        XCTAssertEqual(quiet.status, 30, "notInteractive")

        let gone = try runProcess(
            lactl,
            ["authenticate", "--socket", enclave.directory + "/nothing", "--reason", "Deploy"]
        )
        XCTAssertEqual(gone.status, 69, "no daemon")
    }

    /// A client started as a background job of a terminal (what Foundation's Process, a CI runner
    /// with a pseudo-terminal or `cmd &` in a shell do) must not touch that terminal: changing its
    /// modes would stop the job with SIGTTOU forever. It runs headless; the sensor decides.
    func testABackgroundJobOfATerminalRunsHeadlessInsteadOfStopping() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            throw XCTSkip("needs script(1) for a terminal")
        }
        let enclave = try TestEnclave()
        try enclave.queue(.match)
        // script(1) gives the shell a terminal; `set -m` makes lactl a background job of it.
        let job =
            "set -m; '\(productPath("lactl"))' authenticate --socket '\(enclave.socketPath)' --policy biometrics --reason Background & wait $!"
        var environment = ProcessInfo.processInfo.environment
        environment["SHELL"] = "/bin/bash"
        let out = try runProcess(
            "/usr/bin/script",
            ["-qefc", job, "/dev/null"],
            environment: environment,
            headless: false,
            timeout: 30
        )
        XCTAssertEqual(out.status, 0, out.stdout + out.stderr)
        XCTAssertEqual(try enclave.status().queuedEvents, 0, "the queued touch answered the headless prompt")
    }

    /// The lines of `text` that hold one of `numbers` as a whole number (no digit either side).
    private static func lines(of text: String, holding numbers: [String]) -> [String] {
        text.split(separator: "\n").map(String.init).filter { line in
            numbers.contains { number in
                line.ranges(of: number).contains { range in
                    !(range.lowerBound > line.startIndex && line[line.index(before: range.lowerBound)].isNumber)
                        && !(range.upperBound < line.endIndex && line[range.upperBound].isNumber)
                }
            }
        }
    }

    func testPasscodeAndEnrolmentFromStandardInput() throws {
        let enclave = try TestEnclave(.with { $0.passcode = nil })
        let lactl = productPath("lactl")
        let socket = ["--socket", enclave.socketPath]
        XCTAssertEqual(try runProcess(lactl, ["passcode", "set", "--stdin"] + socket, input: "24681357\n").status, 0)
        XCTAssertEqual(
            try runProcess(lactl, ["enroll", "right-thumb", "--stdin"] + socket, input: "24681357\n").status,
            0
        )
        let wrong = try runProcess(lactl, ["enroll", "left-thumb", "--stdin"] + socket, input: "1111\n")
        XCTAssertEqual(wrong.status, 1)
        XCTAssertTrue(wrong.stderr.contains("not correct"), wrong.stderr)
        XCTAssertEqual(
            try runProcess(lactl, ["passcode", "change", "--stdin"] + socket, input: "24681357\n13572468\n").status,
            0
        )
        let s = try enclave.status()
        XCTAssertEqual(s.enrolledCount, 1)
        XCTAssertFalse(
            try runProcess(lactl, ["status"] + socket).stdout.contains("right-thumb"),
            "status tells how many, not who"
        )
        let names = try runProcess(lactl, ["enrolments", "--stdin"] + socket, input: "13572468\n")
        XCTAssertEqual(names.status, 0, names.stderr)
        XCTAssertEqual(names.stdout, "right-thumb\n")
        XCTAssertEqual(s.passcodeFailures, 0, "the right passcode clears the failure from the wrong one")
        let audit = try runProcess(lactl, ["audit", "--json"] + socket)
        XCTAssertEqual(audit.status, 0)
        XCTAssertTrue(audit.stdout.contains("passcode.change"), audit.stdout)
        // The secrets are longer than any pid, and looked for as whole numbers: a pid, a cookie or
        // a time that merely holds their digits (a pid such as 24681 holds "2468") is no leak.
        let secrets = ["24681357", "13572468"]
        XCTAssertEqual(
            Self.lines(of: "secret=24681357\npid=124681357\n13572468", holding: secrets),
            ["secret=24681357", "13572468"],
            "the search finds a secret whole, and only whole"
        )
        XCTAssertEqual(Self.lines(of: audit.stdout, holding: secrets), [], "no secret in the audit log")
        XCTAssertEqual(Self.lines(of: enclave.log(), holding: secrets), [], "no secret in the daemon's log")
    }

    /// `--stdin < FILE`: the daemon takes secret input from a pipe only (a file's close may wait on
    /// a FUSE server), so lactl passes the file's lines through one; a file larger than a pipe
    /// holds is refused, saying so.
    func testASecretsFileOnStandardInputGoesThroughAPipe() throws {
        let enclave = try TestEnclave(.with { $0.passcode = nil })
        let directory = NSTemporaryDirectory() + "la-secrets-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "24681357\n".write(toFile: directory + "/secrets", atomically: true, encoding: .utf8)
        try String(repeating: "24681357\n", count: 600).write(
            toFile: directory + "/large",
            atomically: true,
            encoding: .utf8
        )
        let lactl = "'\(productPath("lactl"))'"
        let socket = "--socket '\(enclave.socketPath)'"
        let set = try runProcess("/bin/sh", ["-c", "\(lactl) passcode set --stdin \(socket) < '\(directory)/secrets'"])
        XCTAssertEqual(set.status, 0, set.stderr)
        XCTAssertTrue(try enclave.status().passcodeSet)
        let large = try runProcess("/bin/sh", ["-c", "\(lactl) enrolments --stdin \(socket) < '\(directory)/large'"])
        XCTAssertEqual(large.status, 1)
        XCTAssertTrue(large.stderr.contains("at most 4096 bytes"), large.stderr)
    }

    func testSimulateQueuesEventsAndRejectsUnknownOnes() throws {
        let enclave = try TestEnclave()
        let lactl = productPath("lactl")
        XCTAssertEqual(
            try runProcess(lactl, ["simulate", "nomatch", "match", "--socket", enclave.socketPath]).status,
            0
        )
        XCTAssertEqual(try enclave.status().queuedEvents, 2)
        XCTAssertNotEqual(try runProcess(lactl, ["simulate", "wiggle", "--socket", enclave.socketPath]).status, 0)
        XCTAssertEqual(try runProcess(lactl, ["simulate", "--clear", "--socket", enclave.socketPath]).status, 0)
        XCTAssertEqual(try enclave.status().queuedEvents, 0)
    }

    func testDemoRunsToTheEndWithoutATerminal() throws {
        let out = try runProcess(productPath("lactl"), ["demo", "--auto"])
        XCTAssertEqual(out.status, 0, out.stderr)
        XCTAssertTrue(out.stdout.contains("LAError.biometryLockout (-8)"), out.stdout)
        XCTAssertTrue(out.stdout.contains("changed: true"), out.stdout)
    }
}
