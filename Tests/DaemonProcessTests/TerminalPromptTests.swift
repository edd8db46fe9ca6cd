import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The trusted terminal prompt, for real: lactl (an app) runs in a tmux terminal; the daemon draws
/// the prompt on that terminal and reads the keys a person types there. lactl hands the terminal
/// over and learns only the outcome.
final class TerminalPromptTests: XCTestCase {
    private var enclave: TestEnclave!

    /// XCTest keeps every test case object until the process ends: the daemon and its directory
    /// go with the test, not with the object.
    override func tearDown() {
        enclave = nil
    }

    override func setUpWithError() throws {
        guard TmuxTerminal.available else { throw XCTSkip("needs tmux for a terminal") }
        enclave = try TestEnclave()
    }

    /// `lactl authenticate` in the terminal, its outcome and exit status into files.
    private func authenticate(policy: String = "owner", ignoringHangUp: Bool = false) throws -> TerminalCommand {
        try TerminalCommand.lactl(
            "authenticate --policy \(policy) --reason 'Unlock the vault' --json",
            on: enclave,
            ignoringHangUp: ignoringHangUp
        )
    }

    func testThePasscodeIsTypedIntoTheDaemonsPromptAndTheAppGetsTheAnswer() throws {
        let lactl = try authenticate()
        let terminal = lactl.terminal
        terminal.waitFor("wants to confirm it is you")
        terminal.waitFor("Unlock the vault")
        if !terminal.screen().contains("type the passcode") { try terminal.press("C-f") }
        terminal.waitFor("type the passcode")
        try terminal.type("1234")
        try terminal.press("Enter")
        XCTAssertEqual(lactl.exitStatus(), 0, lactl.output + terminal.screen())
        terminal.waitFor("└─ authenticated")
        XCTAssertFalse(terminal.screen().contains("1234"), "typed with echo off:\n\(terminal.screen())")
        let json = try JSONSerialization.jsonObject(with: Data(lactl.output.utf8)) as? [String: Any]
        XCTAssertEqual(json?["success"] as? Bool, true, lactl.output)
        guard
            case .audit(let entries) = try enclave.administer(
                .audit(.init(limit: 20, everyApp: true)),
                secrets: ["1234"]
            )
        else { return XCTFail() }
        XCTAssertTrue(
            entries.contains {
                $0.app.hasSuffix("/lactl") && $0.operation == "evaluate" && $0.result == "success(passcode)"
            },
            "\(entries)"
        )
    }

    func testAWrongPasscodeOnTheTerminalCountsAndEscapeCancels() throws {
        let lactl = try authenticate()
        let terminal = lactl.terminal
        terminal.waitFor("wants to confirm it is you")
        if !terminal.screen().contains("type the passcode") { try terminal.press("C-f") }
        terminal.waitFor("type the passcode")
        try terminal.type("0000")
        try terminal.press("Enter")
        terminal.waitFor("checking…")
        let deadline = Date().addingTimeInterval(10)
        while (try enclave.status().passcodeFailures) < 1, Date() < deadline { usleep(50_000) }
        XCTAssertEqual(try enclave.status().passcodeFailures, 1, "the wrong passcode is an attempt")
        try terminal.press("Escape")
        XCTAssertEqual(lactl.exitStatus(), 12, "10 + |userCancel|: " + lactl.output + terminal.screen())
        XCTAssertTrue(lactl.output.contains("userCancel"), lactl.output)
    }

    /// The terminal goes away mid-prompt (its window closed): the evaluation ends with a clear
    /// error at once, the prompt is free for the next app, and nothing is counted.
    func testATerminalThatClosesMidPromptEndsTheEvaluation() throws {
        let lactl = try authenticate(ignoringHangUp: true)
        let terminal = lactl.terminal
        terminal.waitFor("wants to confirm it is you")
        terminal.stop()
        XCTAssertEqual(lactl.exitStatus(), 14, "10 + |systemCancel|: " + lactl.output)
        XCTAssertTrue(lactl.output.contains("terminal"), lactl.output)
        let status = try enclave.status()
        XCTAssertFalse(status.promptOpen)
        XCTAssertEqual(status.passcodeFailures, 0)
        XCTAssertEqual(status.biometricFailures, 0)
    }

    /// The app is killed while the daemon's prompt is up on its terminal: the evaluation ends
    /// (appCancel), the prompt says so, and the terminal is given back in its own mode.
    func testAnAppKilledMidPromptGivesTheTerminalBack() throws {
        let lactl = try authenticate()
        let terminal = lactl.terminal
        terminal.waitFor("wants to confirm it is you")
        // lactl's own command line (the tmux server's holds the quoted command, which this does not match).
        let killed = try runProcess(
            "/usr/bin/pkill",
            ["-KILL", "-f", "lactl authenticate .*--socket \(enclave.socketPath)"]
        )
        XCTAssertEqual(killed.status, 0, "lactl was running")
        terminal.waitFor("└─ Invalidated by client.", timeout: 5)
        try terminal.type("echoed-again")
        terminal.waitFor("echoed-again", timeout: 5)
        XCTAssertFalse(try enclave.status().promptOpen)
    }

    /// Attack: a client hands its terminal, stops its output (as Ctrl-S does) and clears
    /// `O_NONBLOCK` on the descriptor it kept — the open file description it shares with the
    /// daemon, which the daemon made non-blocking — again and again, then asks for a prompt there.
    /// Before, the daemon's first screen blocked in `write`, and with it the prompt's close and the
    /// daemon's stop (until systemd's SIGKILL, 90 s later). Handed by its own name, the terminal is
    /// opened again by the daemon: nothing the client does to its copy reaches the daemon's.
    func testAClientThatClearsNonBlockingOnItsTerminalCannotHoldTheDaemonsStop() throws {
        try holdTheTerminal(handing: "name")
    }

    /// The same attack through /dev/tty, which the daemon cannot open again (it would open its own
    /// terminal, or none), so it draws on the description the client shares: before, its write
    /// stayed blocked for as long as the client liked, holding a thread of the daemon's, the
    /// prompt's descriptors and its key reader. A write now has a deadline that interrupts it
    /// (`SystemCallInterruption`): no thread stays blocked, the next prompt is drawn there too, and the
    /// daemon stops.
    func testAClientThatHandsDevTtyAndClearsNonBlockingCannotHoldTheDaemonsStop() throws {
        try holdTheTerminal(handing: "tty")
    }

    /// The threads of `pid` in `write(2)` now.
    private func threadsBlockedInWrite(_ pid: pid_t) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.filter { Self.systemCall(of: "/proc/\(pid)/task/\($0)") == Self.writeCall }.count
    }

    /// A terminal that hangs up after it was handed and before the prompt's first screen (its
    /// window closed): its settings cannot be read, and the evaluation ends with systemCancel at
    /// once, not when the prompt times out.
    func testATerminalThatHangsUpBeforeTheFirstScreenEndsTheEvaluation() throws {
        let attack = """
            import signal
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            open(ready + ".handed", "w").close()
            while not os.path.exists(ready + ".gone"): time.sleep(0.05)
            start = time.monotonic()
            ask(3, "late", 1, "After the hang-up")
            daemon.settimeout(90)
            while True:
                reply = receive(daemon)
                if reply["id"] == 3: break
            open(ready, "w").write("%.1f %s" % (time.monotonic() - start, json.dumps(reply)))
            """
        let (_, finding) = try runAttacker(attack, handing: "name") { attacker, ready in
            eventually("the client to hand its terminal", timeout: 30) {
                FileManager.default.fileExists(atPath: ready + ".handed")
            }
            attacker.terminal.stop()
            FileManager.default.createFile(atPath: ready + ".gone", contents: nil)
        }
        let seconds = finding.split(separator: " ").first.flatMap { Double($0) } ?? 99
        XCTAssertLessThan(seconds, 10, "the evaluation was answered only when the prompt timed out: \(finding)")
        XCTAssertTrue(finding.contains("The terminal the prompt was shown on closed."), finding)
    }

    /// Attack on the key reader: a client hands /dev/tty, keeps clearing `O_NONBLOCK` on the
    /// description it shares, and sets the terminal to wait for 255 characters or 25.5 s after the
    /// last (VMIN, VTIME: the terminal's settings, which a client changes as the daemon does). An
    /// arrow key (ESC [ A) then leaves the daemon's read of the rest of the sequence waiting, and
    /// the prompt's close waited for it, and the daemon's stop with the close (a client that types
    /// a key every 25 s holds them for good). The close now interrupts the reader: the client's
    /// invalidation is answered at once, and no thread of the prompt's is left.
    func testAClientThatBlocksTheKeyReaderCannotHoldThePromptsClose() throws {
        let attack = """
            keep_it_blocking()
            ask(3, "held", 1, "Hold the reader")
            time.sleep(1)
            attributes = termios.tcgetattr(tty)
            attributes[6][termios.VMIN], attributes[6][termios.VTIME] = 255, 255
            termios.tcsetattr(tty, termios.TCSANOW, attributes)
            open(ready + ".raw", "w").close()
            while not os.path.exists(ready + ".typed"): time.sleep(0.05)
            invalidate_and_time_the_answer()
            """
        let (attacker, answered) = try runAttacker(attack, handing: "tty") { attacker, ready in
            eventually("the attacker to set its terminal", timeout: 30) {
                FileManager.default.fileExists(atPath: ready + ".raw")
            }
            try attacker.terminal.press("Up")
            // The attack holds: the prompt's key reader waits in read(2).
            eventually("the key reader to wait in read", timeout: 10) {
                self.promptThreads(self.enclave.processID, inSystemCall: Self.readCall) == 1
            }
            FileManager.default.createFile(atPath: ready + ".typed", contents: nil)
        }
        // The evaluation's answer came once the prompt closed: well before the read's 25.5 s.
        XCTAssertLessThan(Double(answered) ?? 99, 5, "seconds from the invalidation to the answer: \(answered)")
        eventually("no thread of the prompt's left", timeout: 5) { self.promptThreads(self.enclave.processID) == 0 }
        XCTAssertTrue(enclave.stop(within: 20), "the daemon did not stop within 20 s of SIGTERM")
        attacker.terminal.stop()
    }

    /// Attack on the prompt's writer: a client stops the output of /dev/tty it handed and keeps
    /// clearing `O_NONBLOCK` on the description it shares, then types passcodes. Each Enter queues
    /// a "checking" line and each wrong passcode a screen, every one of which waits for the
    /// terminal up to its deadline: without a bound on them all, the prompt's close (and the
    /// daemon's stop) waited half a second for each. The prompt's writes wait two seconds in all.
    func testAClientThatTypesBehindAStoppedTerminalCannotHoldThePromptsClose() throws {
        let attack = """
            stop_output_and_keep_it_blocking()
            ask(3, "held", 2, "Hold the writer")
            time.sleep(1)
            open(ready + ".asked", "w").close()
            while not os.path.exists(ready + ".typed"): time.sleep(0.05)
            invalidate_and_time_the_answer()
            """
        let (attacker, answered) = try runAttacker(attack, handing: "tty") { attacker, ready in
            eventually("the attacker to ask", timeout: 30) { FileManager.default.fileExists(atPath: ready + ".asked") }
            // To the passcode (the screen cannot be seen: the output is stopped), then wrong ones.
            try attacker.terminal.press("C-f")
            Thread.sleep(forTimeInterval: 1.5)
            for _ in 0..<10 {
                try attacker.terminal.type("1")
                try attacker.terminal.press("Enter")
            }
            // The passcodes reached the evaluation (it was on its passcode screen), so their lines
            // and screens are queued.
            eventually("a wrong passcode counted", timeout: 20) {
                ((try? self.enclave.status().passcodeFailures) ?? 0) >= 1
            }
            FileManager.default.createFile(atPath: ready + ".typed", contents: nil)
        }
        // Well under the half second each queued text could wait.
        XCTAssertLessThan(Double(answered) ?? 99, 4, "seconds from the invalidation to the answer: \(answered)")
        XCTAssertTrue(enclave.stop(within: 20), "the daemon did not stop within 20 s of SIGTERM")
        attacker.terminal.stop()
    }

    /// The daemon's threads that draw a prompt or read its keys (`la-prompt-draw`,
    /// `la-prompt-keys`); only those in `call` now, if given (`/proc/PID/task/TID/syscall`: its
    /// number first).
    private func promptThreads(_ pid: pid_t, inSystemCall call: String? = nil) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.filter { task in
            let name = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)) ?? ""
            guard name.hasPrefix("la-prompt-") else { return false }
            guard let call else { return true }
            return Self.systemCall(of: "/proc/\(pid)/task/\(task)") == call
        }.count
    }

    #if arch(x86_64)
    private static let readCall = "0"
    private static let writeCall = "1"
    #else
    private static let readCall = "63"
    private static let writeCall = "64"
    #endif

    /// The number of the system call the task at `path` is in now, if any.
    private static func systemCall(of path: String) -> String? {
        let call = (try? String(contentsOfFile: path + "/syscall", encoding: .utf8)) ?? ""
        return call.split(separator: " ").first.map(String.init)
    }

    /// `handing`: "name" hands the terminal opened by its own name, "tty" opened as /dev/tty. The
    /// client asks twice: once its first prompt is over (invalidated), it asks again, and says
    /// whether that prompt came to it headless, or was answered after it invalidated it (drawn on
    /// the terminal).
    private func holdTheTerminal(handing: String) throws {
        let attack = """
            stop_output_and_keep_it_blocking()
            ask(3, "held", 1, "Hold the daemon")
            time.sleep(1)
            # Again, once the first prompt is over.
            send(daemon, {"id": 4, "op": "invalidate", "args": {"context": "held"}})
            time.sleep(3)
            ask(5, "again", 1, "Hold the daemon")
            daemon.settimeout(3)
            second = "no answer"
            try:
                while True:
                    reply = receive(daemon)
                    if reply["id"] == 5 and reply["reply"]["kind"] == "prompt":
                        second = "headless"
                        break
            except socket.timeout:
                # No headless prompt: the prompt is on the terminal, and ends when invalidated.
                send(daemon, {"id": 6, "op": "invalidate", "args": {"context": "again"}})
                daemon.settimeout(10)
                while receive(daemon)["id"] != 5: pass
                second = "on the terminal"
            open(ready, "w").write(second)
            time.sleep(120)
            """
        let (attacker, second) = try runAttacker(attack, handing: handing)
        // By name, the daemon's own description: nothing blocks. Through /dev/tty, the shared one:
        // each write is interrupted at its deadline. Either way no thread of the daemon's is left in
        // `write`, and the next prompt is drawn on the terminal too.
        XCTAssertEqual(second, "on the terminal")
        XCTAssertEqual(threadsBlockedInWrite(enclave.processID), 0, "the daemon's threads blocked in write")
        // The attack reached the daemon: its first screen could not be written whole.
        let log = (try? String(contentsOfFile: enclave.logPath, encoding: .utf8)) ?? ""
        XCTAssertTrue(
            log.contains("a terminal prompt's write did not finish within"),
            "the daemon's log does not say so"
        )
        XCTAssertTrue(enclave.stop(within: 20), "the daemon did not stop within 20 s of SIGTERM")
        XCTAssertFalse(FileManager.default.fileExists(atPath: enclave.socketPath), "a graceful stop removes the socket")
        attacker.terminal.stop()
    }

    /// Runs `attack` in a Python client in a tmux terminal, after it said hello and handed its
    /// terminal (`handing`: "name" or "tty"; `tty` is the descriptor it handed, `daemon` its
    /// socket, `ready` the file it writes its finding to); `meanwhile` runs while it does, given
    /// the client and that file. Answers the client and its finding.
    private func runAttacker(
        _ attack: String,
        handing: String,
        meanwhile: (_ attacker: TerminalCommand, _ ready: String) throws -> Void = { _, _ in }
    ) throws -> (TerminalCommand, String) {
        let script = """
            import base64, fcntl, json, os, socket, struct, sys, termios, threading, time
            socket_path, ready, version, handing = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
            def send(s, message):
                data = json.dumps(message).encode()
                s.sendall(struct.pack(">I", len(data)) + data)
            def receive(s):
                def exactly(n):
                    data = b""
                    while len(data) < n:
                        chunk = s.recv(n - len(data))
                        if not chunk: sys.exit("the daemon closed the connection")
                        data += chunk
                    return data
                return json.loads(exactly(struct.unpack(">I", exactly(4))[0]))
            daemon = socket.socket(socket.AF_UNIX)
            daemon.connect(socket_path)
            send(daemon, {"id": 1, "op": "hello", "args": {"version": version}})
            receive(daemon)
            send(daemon, {"id": 2, "op": "handoff", "args": {"kind": "terminal"}})
            ticket = base64.b64decode(receive(daemon)["reply"]["value"])
            tty = os.open(os.ttyname(0) if handing == "name" else "/dev/tty", os.O_RDWR | os.O_NOCTTY)
            handoff = socket.socket(socket.AF_UNIX)
            handoff.connect(socket_path + ".handoff")
            if handoff.recv(1) != bytes([\(Handoff.ready)]): sys.exit("the daemon is not ready for the handoff")
            socket.send_fds(handoff, [ticket], [tty])
            status = handoff.recv(1)
            if status != b"\\x00": sys.exit("handoff refused: %r" % status)
            def ask(request, context, policy, reason):
                # An evaluation whose prompt is drawn on the handed terminal.
                options = {"reason": reason, "reuseDuration": 0, "interactionNotAllowed": False, "onTerminal": True}
                send(daemon, {"id": request, "op": "evaluate", "args": {"context": context, "policy": policy, "options": options}})
            def keep_it_blocking():
                # O_NONBLOCK is the description's, which the daemon shares: cleared again and again.
                def clear():
                    while True:
                        fcntl.fcntl(tty, fcntl.F_SETFL, fcntl.fcntl(tty, fcntl.F_GETFL) & ~os.O_NONBLOCK)
                        time.sleep(0.0001)
                threading.Thread(target=clear, daemon=True).start()
            def stop_output_and_keep_it_blocking():
                termios.tcflow(tty, termios.TCOOFF)
                keep_it_blocking()
            def invalidate_and_time_the_answer():
                # Context "held", asked by request 3: the seconds until its answer are the finding.
                start = time.monotonic()
                send(daemon, {"id": 4, "op": "invalidate", "args": {"context": "held"}})
                daemon.settimeout(60)
                while receive(daemon)["id"] != 3: pass
                open(ready, "w").write("%.1f" % (time.monotonic() - start))
                time.sleep(120)

            """ + attack
        let scriptPath = enclave.directory + "/attack-terminal.py"
        let ready = enclave.directory + "/finding"
        try script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let attacker = try TerminalCommand(
            "/usr/bin/python3 '\(scriptPath)' '\(enclave.socketPath)' '\(ready)' \(enclaveProtocolVersion) \(handing)",
            in: enclave.directory
        )
        try meanwhile(attacker, ready)
        eventually("the attacker's finding", timeout: 30) {
            FileManager.default.fileExists(atPath: ready) || attacker.exitStatus(timeout: 0.1) != nil
        }
        let finding =
            (try? String(contentsOfFile: ready, encoding: .utf8)) ?? "the attacker stopped: \(attacker.errors)"
        return (attacker, finding)
    }
}
