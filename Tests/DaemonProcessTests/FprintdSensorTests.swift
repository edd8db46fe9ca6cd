import EnclaveClient
import EnclaveCore
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// laenclaved with the real fprintd and libfprint's virtual reader on a private bus, a fresh stack
/// per test. The finger is the test: it sends SCAN commands to the virtual reader once the daemon
/// has claimed it.
final class FprintdSensorTests: XCTestCase {
    private func enclave(_ stack: FprintdStack) throws -> TestEnclave {
        try TestEnclave(
            .with {
                $0.sensor = .none
                $0.enrolled = []
                $0.extraArguments = ["--fprintd"]
                $0.environment = stack.environment
                $0.promptTimeout = 30
            }
        )
    }

    /// Enrols `finger` with the print `print` through lactl, feeding one SCAN per stage.
    @discardableResult
    private func enrol(
        _ enclave: TestEnclave,
        _ stack: FprintdStack,
        finger: String = "right-index-finger",
        print: String = "finger-A"
    ) throws -> ProcessOutput {
        let done = DispatchSemaphore(value: 0)
        let box = OutputBox()
        DispatchQueue.global().async {
            box.output = try? runProcess(
                productPath("lactl"),
                ["enroll", finger, "--stdin", "--socket", enclave.socketPath],
                input: "1234\n",
                timeout: 60
            )
            done.signal()
        }
        do { for _ in 0..<5 { try stack.device("SCAN \(print)") } } catch {
            _ = done.wait(timeout: .now() + 60)
            XCTFail(
                "lactl enroll: \(String(describing: box.output))\ndaemon log:\n\(enclave.log())\nfprintd log:\n\(stack.log())"
            )
            throw error
        }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        try stack.waitUntilReleased()
        return try XCTUnwrap(box.output)
    }

    /// A stranger's finger on the reader; returns once the daemon has counted the attempt.
    /// Fingers queued ahead in libfprint's virtual reader were now and then never counted (its
    /// source hands a command that arrives while a finished verify is still completing to that
    /// verify): so a test puts the next finger down only once the last attempt was counted, as a
    /// person does.
    private func strangersFinger(
        _ enclave: TestEnclave,
        _ stack: FprintdStack,
        counted failures: Int,
        file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        try stack.device("SCAN finger-B")
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if (try? enclave.status().biometricFailures) == failures { return }
            usleep(10_000)
        }
        XCTFail(
            "attempt \(failures) was not counted: \((try? enclave.status()).map { "\($0)" } ?? "no status")\ndaemon log:\n\(enclave.log().suffix(2000))\nfprintd:\n\(stack.log())",
            file: file,
            line: line
        )
        throw NSError(
            domain: "fprintd",
            code: 4,
            userInfo: [NSLocalizedDescriptionKey: "attempt \(failures) was not counted"]
        )
    }

    /// An evaluation with the biometric policy running in the background.
    private func evaluating(_ enclave: TestEnclave, _ context: LAContext? = nil) -> Task<LAError.Code?, Never> {
        enclave.run {
            let context = context ?? LAContext()  // made inside `run`: bound to this test's daemon
            return Task { await evaluate(context, .deviceOwnerAuthenticationWithBiometrics) }
        }
    }

    /// A real reader and a daemon as installed (nobody turned simulation on): `lactl simulate
    /// match` must not pass a real-fingerprint prompt. Before, user mode accepted scripted touches
    /// whatever the sensor, and the evaluation succeeded with no finger on the reader.
    func testAScriptedTouchCannotPassARealReadersPrompt() async throws {
        let stack = try FprintdStack()
        let enclave = try TestEnclave(
            .with {
                $0.sensor = .none
                $0.enrolled = []
                $0.extraArguments = ["--fprintd"]
                $0.environment = stack.environment
                $0.promptTimeout = 30
                $0.allowsSimulation = nil  // the daemon's own default, as an installation has it
            }
        )
        try enrol(enclave, stack)
        let evaluation = evaluating(enclave)
        try stack.waitUntilClaimed()
        let scripted = try runProcess(productPath("lactl"), ["simulate", "match", "--socket", enclave.socketPath])
        XCTAssertNotEqual(scripted.status, 0, "a scripted touch was accepted with a real reader")
        XCTAssertTrue(scripted.stderr.contains("real fingerprint reader"), scripted.stderr)
        let status = try enclave.status()
        XCTAssertFalse(status.simulationEnabled, "status says simulation is off")
        XCTAssertEqual(status.queuedEvents, 0)
        // The prompt is still the person's: their finger decides.
        try stack.device("SCAN finger-A")
        let code = await evaluation.value
        XCTAssertNil(code, enclave.log())
    }

    /// Simulation turned on by name with a real reader (the testing kit's default): scripted input
    /// is accepted, and the log, `lactl status` and every prompt screen say so.
    func testARealReaderWithSimulationTurnedOnSaysSoEverywhere() throws {
        let stack = try FprintdStack()
        let enclave = try enclave(stack)
        try enrol(enclave, stack)
        XCTAssertTrue(enclave.log().contains("SIMULATION ENABLED WITH A REAL FINGERPRINT READER"), enclave.log())
        let status = try runProcess(productPath("lactl"), ["status", "--socket", enclave.socketPath])
        XCTAssertTrue(status.stderr.contains("REAL fingerprint reader"), status.stderr)
        let client = try RawClient(path: enclave.socketPath)
        defer { client.close() }
        client.sendRequest(id: 1, op: "hello", args: ["version": enclaveProtocolVersion])
        XCTAssertEqual((try client.readReply()?["reply"] as? [String: Any])?["kind"] as? String, "hello")
        client.sendRequest(
            id: 2,
            op: "evaluate",
            args: [
                "context": "c", "policy": 1,
                "options": [
                    "reason": "Unlock", "reuseDuration": 0, "interactionNotAllowed": false, "onTerminal": true,
                ],
            ]
        )
        let prompt = try client.readReply(timeout: 30)?["reply"] as? [String: Any]
        XCTAssertEqual(prompt?["kind"] as? String, "prompt", "\(String(describing: prompt))")
        XCTAssertEqual(
            (prompt?["value"] as? [String: Any])?["warning"] as? String,
            EvaluationMachine.scriptedInputWarning
        )
        try enclave.queue(.match)
        var final: [String: Any]?
        for _ in 0..<10 {
            guard let reply = try client.readReply(timeout: 30)?["reply"] as? [String: Any] else { break }
            if reply["kind"] as? String == "evaluated" {
                final = reply["value"] as? [String: Any]
                break
            }
        }
        XCTAssertEqual(
            final?["success"] as? Bool,
            true,
            "a scripted match passes when simulation was asked for: \(String(describing: final))"
        )
    }

    /// logind decides who may arm the reader: a user logged in only elsewhere (ssh, cron: "online")
    /// cannot claim it from the person at the machine, and a capture ends once its user stops being
    /// the active one. Before, the daemon armed the reader for whoever asked.
    func testTheReaderIsArmedOnlyForTheUserAtTheMachine() async throws {
        let stack = try FprintdStack()
        let enclave = try enclave(stack)
        try enrol(enclave, stack)
        try stack.waitUntilReleased()

        try stack.setLoginState("online")
        let away = await evaluating(enclave).value
        XCTAssertEqual(away, .systemCancel, "an evaluation for a user who is not at the machine")
        XCTAssertTrue(enclave.log().contains("armed only for the user at the machine"), enclave.log())
        XCTAssertThrowsError(
            try EnclaveConnection.connectSocket(stack.deviceSocket),
            "the reader was claimed for a user not at the machine"
        )

        try stack.setLoginState("active")
        let present = evaluating(enclave)
        try stack.device("SCAN finger-A")
        let code = await present.value
        XCTAssertNil(code, enclave.log())
        try stack.waitUntilReleased()

        // At the machine when the prompt opened, away before touching: the capture ends.
        let leaving = evaluating(enclave)
        try stack.waitUntilClaimed()
        try stack.setLoginState("online")
        let left = await leaving.value
        XCTAssertEqual(left, .systemCancel)
        try stack.waitUntilReleased()
    }

    func testEnrolmentWithProgressThenMatchAndNoMatches() async throws {
        let stack = try FprintdStack()
        let enclave = try enclave(stack)
        let status = try enclave.status()
        XCTAssertTrue(status.sensor?.name.contains("fprintd") ?? false, "\(status)")
        let out = try enrol(enclave, stack)
        XCTAssertEqual(out.status, 0, out.stdout + out.stderr)
        XCTAssertTrue(out.stdout.contains("stage 3 of 5"), out.stdout)
        XCTAssertTrue(out.stdout.contains("lift and touch again"), out.stdout)
        XCTAssertTrue(try stack.enrolled(user: "root").contains("right-index-finger"), "fprintd itself lists it")
        XCTAssertEqual(try enclave.enrolments(), ["right-index-finger"])

        let match = evaluating(enclave)
        try stack.device("SCAN finger-A")
        let matched = await match.value
        XCTAssertNil(matched, "the enrolled print matches")
        try stack.waitUntilReleased()

        let mismatch = evaluating(enclave)
        for attempt in 1...3 { try strangersFinger(enclave, stack, counted: attempt) }
        let refused = await mismatch.value
        XCTAssertEqual(
            refused,
            .authenticationFailed,
            "three non-matches end the evaluation\ndaemon log:\n\(enclave.log())\nfprintd log:\n\(stack.log())"
        )
        XCTAssertEqual(try enclave.status().biometricFailures, 3)
        try stack.waitUntilReleased()

        // Two more failures in a second evaluation: the lockout after five holds across evaluations.
        let second = evaluating(enclave)
        for attempt in 4...5 { try strangersFinger(enclave, stack, counted: attempt) }
        let lockedOut = await second.value
        XCTAssertEqual(lockedOut, .biometryLockout)
        try stack.waitUntilReleased()
        XCTAssertEqual(
            enclave.run { canEvaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) },
            .biometryLockout
        )
    }

    /// pam_laenclave against the real reader (issue 32, item 9): pamtester without a terminal,
    /// as root for root, in a local seated session of the test's own, and the system daemon
    /// claiming fprintd's virtual reader. The enrolled finger passes; a stranger's three times is
    /// wrong (PAM_AUTH_ERR), counted toward the lockout apps share.
    func testThePAMModuleTakesTheRealReadersFinger() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/pamtester"),
            let cgroupRoot = PAMModuleBench.cgroupRoot
        else { throw XCTSkip("needs root, pamtester and a writable cgroup hierarchy") }
        let stack = try FprintdStack()
        let tag = "fp\(getpid())\(UInt32.random(in: 1000...9999))"
        let logind = NSTemporaryDirectory() + "logind-\(tag)"
        try FileManager.default.createDirectory(atPath: logind + "/sessions", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: logind) }
        try "UID=0\nREMOTE=0\nSEAT=seat0\n".write(
            toFile: "\(logind)/sessions/\(tag)",
            atomically: true,
            encoding: .utf8
        )
        let cgroup = "\(cgroupRoot)/session-\(tag).scope"
        XCTAssertEqual(mkdir(cgroup, 0o755), 0)
        defer { rmdir(cgroup) }
        let enclave = try TestEnclave(
            .with {
                $0.systemMode = true
                $0.sensor = .none
                $0.enrolled = []
                $0.extraArguments = ["--fprintd", "--logind-directory", logind]
                $0.environment = stack.environment
                $0.promptTimeout = 30
            }
        )
        try enrol(enclave, stack)
        try stack.waitUntilReleased()
        let service = "laenclave-\(tag)"
        try "auth required \(try PAMModuleBench.module()) socket=\(enclave.socketPath)\n".write(
            toFile: "/etc/pam.d/\(service)",
            atomically: true,
            encoding: .utf8
        )
        defer { unlink("/etc/pam.d/\(service)") }
        let arguments = [
            "-w", "/bin/sh", "-c",
            "echo $$ > '\(cgroup)/cgroup.procs' && exec pamtester '\(service)' root authenticate",
        ]

        let matching = Background { try PAMModuleBench.runPamtester(arguments) }
        try stack.device("SCAN finger-A")
        let passed = try matching.wait()
        XCTAssertEqual(passed.status, 0, passed.stdout + passed.stderr + "\n" + enclave.log().suffix(2000))
        try stack.waitUntilReleased()

        let stranger = Background { try PAMModuleBench.runPamtester(arguments) }
        for attempt in 1...3 { try strangersFinger(enclave, stack, counted: attempt) }
        let refused = try stranger.wait()
        XCTAssertTrue(refused.stderr.contains(PAMResult.authError), refused.stdout + refused.stderr)
        XCTAssertEqual(try enclave.status().biometricFailures, 3, "counted where apps count")
        try stack.waitUntilReleased()
    }

    /// pam_laenclave on a terminal with fprintd's reader armed (issue 32, item 9), for a user
    /// with a login password: typed while the reader waits for a finger, it passes and the reader
    /// is let go; three strangers' fingers move the prompt to the password alone, which passes;
    /// the enrolled finger passes with no Enter.
    func testThePasswordOrTheRealReadersFingerOnTheTerminal() throws {
        guard TmuxTerminal.available else { throw XCTSkip("needs tmux") }
        let stack = try FprintdStack()
        let b = try PAMModuleBench(fprintd: stack)
        defer { b.stop() }

        let typed = try b.pamtesterOnTerminal()
        typed.terminal.waitFor("or type your password")
        try typed.terminal.type(b.password)
        try typed.terminal.press("Enter")
        XCTAssertEqual(typed.exitStatus(), 0, typed.errors + typed.terminal.screen() + b.enclave.log().suffix(2000))
        XCTAssertTrue(try b.pamAudit(count: 1).first?.result.hasPrefix("success (success(passcode))") == true)
        try stack.waitUntilReleased()

        let missed = try b.pamtesterOnTerminal()
        missed.terminal.waitFor("or type your password")
        for attempt in 1...3 {
            // Each scan waited for until counted (the user's own count: lactl as the user).
            try stack.device("SCAN finger-B")
            let deadline = Date().addingTimeInterval(10)
            while !(try b.userStatus()).contains("\"biometricFailures\" : \(attempt)"), Date() < deadline {
                usleep(20_000)
            }
            XCTAssertTrue(try b.userStatus().contains("\"biometricFailures\" : \(attempt)"), "attempt \(attempt)")
        }
        missed.terminal.waitFor("Enter your password")
        try stack.waitUntilReleased()
        try missed.terminal.type(b.password)
        try missed.terminal.press("Enter")
        XCTAssertEqual(missed.exitStatus(), 0, missed.errors + missed.terminal.screen())

        let touched = try b.pamtesterOnTerminal()
        touched.terminal.waitFor("or type your password")
        try stack.device("SCAN finger-A")
        XCTAssertEqual(touched.exitStatus(), 0, touched.errors + touched.terminal.screen())
        XCTAssertTrue(try b.pamAudit(count: 3).first?.result.hasPrefix("success (success(biometric))") == true)
        try stack.waitUntilReleased()
    }

    /// After the third non-match the prompt moves on to the passcode: the session disarms the
    /// sensor, the reader is let go while the prompt stays open, and the passcode decides.
    func testMovingOnToThePasscodeLetsGoOfTheReader() async throws {
        let stack = try FprintdStack()
        let enclave = try enclave(stack)
        try enrol(enclave, stack)
        let evaluation = enclave.run {
            let context = LAContext()
            return Task { await evaluate(context, .deviceOwnerAuthentication) }
        }
        for attempt in 1...3 { try strangersFinger(enclave, stack, counted: attempt) }
        try stack.waitUntilReleased()
        XCTAssertTrue(try enclave.status().promptOpen, "the prompt waits for the passcode")
        XCTAssertEqual(try enclave.status().biometricFailures, 3)
        try enclave.queue(.passcode("1234"))
        let code = await evaluation.value
        XCTAssertNil(code, enclave.log())
    }

    func testARetryScanIsShownButNotCounted() async throws {
        let stack = try FprintdStack()
        let enclave = try enclave(stack)
        try enrol(enclave, stack)
        let evaluation = evaluating(enclave)
        try stack.device("RETRY 2")  // "finger not centred": the verify goes on
        eventually("the retry to reach the prompt") { enclave.log().contains("finger not centred") }
        try stack.device("SCAN finger-A")
        let code = await evaluation.value
        XCTAssertNil(code)
        XCTAssertEqual(try enclave.status().biometricFailures, 0, "a retry is not a failed attempt")
        XCTAssertTrue(enclave.log().contains("finger not centred"), "the retry reached the prompt")
    }

    func testCancellingMidScanReleasesTheReader() async throws {
        let stack = try FprintdStack()
        let enclave = try enclave(stack)
        try enrol(enclave, stack)
        let context = enclave.run { LAContext() }
        let evaluation = evaluating(enclave, context)
        try stack.device("SET_SCAN_TYPE swipe")  // answers only once the daemon has claimed the reader
        context.invalidate()
        let code = await evaluation.value
        XCTAssertEqual(code, .appCancel)
        try stack.waitUntilReleased(timeout: 5)
        // The reader is free for the next evaluation, which the next finger decides.
        let next = evaluating(enclave)
        try stack.device("SCAN finger-A")
        let matched = await next.value
        XCTAssertNil(matched)
    }

    /// Two apps ask at once: the second waits for the first's prompt, then gets the reader; each
    /// touch decides its own evaluation and none leaks into the other.
    func testTwoEvaluationsContendingForTheReaderAreServedInTurn() async throws {
        let stack = try FprintdStack()
        let enclave = try enclave(stack)
        try enrol(enclave, stack)
        let first = evaluating(enclave)
        try stack.device("SET_SCAN_TYPE swipe")  // the first holds the reader now
        let second = evaluating(enclave)
        eventually("the first prompt to open", timeout: 5) { (try? enclave.status().promptOpen) ?? false }
        try strangersFinger(enclave, stack, counted: 1)  // a stranger's finger: the first's attempt fails…
        try stack.device("SCAN finger-A")  // …then the owner's: the first succeeds
        let firstCode = await first.value
        XCTAssertNil(firstCode)
        try stack.device("SCAN finger-A")  // the second now has the reader
        let secondCode = await second.value
        XCTAssertNil(secondCode)
        XCTAssertEqual(try enclave.status().biometricFailures, 0, "the first's success reset the count")
        guard
            case .audit(let entries) = try enclave.administer(
                .audit(.init(limit: 10, everyApp: true)),
                secrets: ["1234"]
            )
        else { return XCTFail() }
        XCTAssertEqual(
            entries.filter { $0.operation == "evaluate" && $0.result.hasPrefix("success") }.count,
            2,
            "\(entries)"
        )
    }

    func testFprintdKilledMidVerifyEndsTheEvaluationAndARestartRecovers() async throws {
        let stack = try FprintdStack()
        let enclave = try enclave(stack)
        try enrol(enclave, stack)
        let evaluation = evaluating(enclave)
        try stack.device("SET_SCAN_TYPE swipe")
        stack.killFprintd()
        let code = await evaluation.value
        XCTAssertEqual(code, .systemCancel)
        XCTAssertTrue(
            enclave.log().contains("fprintd stopped") || enclave.log().contains("sensor failed"),
            enclave.log()
        )
        XCTAssertEqual(try enclave.status().biometricFailures, 0, "a dead reader is not a failed attempt")
        try stack.startFprintd()
        let next = evaluating(enclave)
        try stack.device("SCAN finger-A")
        let matched = await next.value
        XCTAssertNil(matched, "a new fprintd serves the next evaluation (prints survive the restart)")
    }

    func testAReaderHeldByAnotherProgramEndsTheEvaluationClearly() async throws {
        let stack = try FprintdStack()
        let enclave = try enclave(stack)
        try enrol(enclave, stack)
        // Another program claims the reader and keeps it (a claim lives as long as its connection).
        let holder = try DaemonLauncher.spawn(
            "/usr/bin/python3",
            [
                "-c",
                """
                import gi, time
                gi.require_version("Gio", "2.0")
                from gi.repository import Gio, GLib
                bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
                bus.call_sync("net.reactivated.Fprint", "/net/reactivated/Fprint/Device/0", "net.reactivated.Fprint.Device", "Claim",
                              GLib.Variant("(s)", ("someone-else",)), None, 0, 5000, None)
                open("\(stack.directory)/held", "w").close()
                time.sleep(120)
                """,
            ],
            environment: stack.environment
        )
        defer { terminateAndWait(holder, grace: 2) }
        eventually("the other program's claim", timeout: 10) {
            FileManager.default.fileExists(atPath: stack.directory + "/held")
        }
        let code = await evaluating(enclave).value
        XCTAssertEqual(code, .systemCancel)
        XCTAssertTrue(enclave.log().contains("in use by another program"), enclave.log())
        terminateAndWait(holder, grace: 2)
        try stack.waitUntilReleased()  // fprintd closes the reader once it sees the holder gone
        let next = evaluating(enclave)
        try stack.device("SCAN finger-A")
        let matched = await next.value
        XCTAssertNil(matched, "once the other program lets go, the reader works: \(enclave.log().suffix(1500))")
    }

    /// The enrolled list is read on one long-lived connection and kept a moment (an evaluation
    /// reads it several times), yet a deletion made with another tool is still seen.
    func testReadsShareOneConnectionAndAnotherToolsDeletionIsSeen() async throws {
        let stack = try FprintdStack()
        let enclave = try enclave(stack)
        try enrol(enclave, stack)
        XCTAssertEqual(try enclave.enrolments(), ["right-index-finger"])
        let before = try stack.newestConnectionNumber()
        for _ in 0..<20 { _ = try enclave.status() }
        let after = try stack.newestConnectionNumber()
        // The second query is itself one connection.
        XCTAssertLessThanOrEqual(
            after - before,
            2,
            "twenty status requests opened \(after - before - 1) connections to the bus"
        )

        XCTAssertNil(try enclave.status().enrolmentChangedElsewhereAt, "enrolled through the daemon, with the passcode")
        try stack.deletePrints(user: "root")
        eventually("the daemon to see the prints deleted through fprintd", timeout: 10) {
            (try? enclave.status().enrolledCount) == 0
        }
        // A change made around the daemon skipped the passcode rule: the doctor says so.
        XCTAssertNotNil(try enclave.status().enrolmentChangedElsewhereAt)
        let doctor = try runProcess(productPath("lactl"), ["doctor", "--socket", enclave.socketPath])
        XCTAssertTrue(doctor.stdout.contains("changed outside laenclaved"), doctor.stdout)
    }
}

private final class OutputBox: @unchecked Sendable {
    var output: ProcessOutput?
}
