import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `pam_laenclave.so` driven by the real programs (pamtester, on a real terminal where the person
/// types) against a real system daemon: each return code of docs/architecture.md's table, the
/// finger or the password at once, the shared lockout, the reuse window, and who may ask.
final class PAMModuleTests: XCTestCase {
    private var bench: PAMModuleBench?

    override func tearDown() {
        bench?.stop()
        bench = nil
    }

    private func makeBench(
        options: String = "",
        agent: Bool = false,
        loginStack: String = PAMModuleBench.passwordOnlyStack
    ) throws -> PAMModuleBench {
        let made = try PAMModuleBench(options: options, agent: agent, loginStack: loginStack)
        bench = made
        return made
    }

    /// A caller without a terminal (`sudo -S`, a script) passes with a touch; it is told what to
    /// do, and the audit log says for whom, from which service, terminal, host and session, and
    /// how it ended.
    func testAQueuedTouchPassesAndTheAuditLogSaysWhoAskedFromWhere() throws {
        // Options it does not know, or cannot read, are logged and ignored: never a lockout.
        let b = try makeBench(options: "frobnicate=1 timeout=soon reuse=99999")
        XCTAssertEqual(try b.asUser(["simulate", "match"]).status, 0)
        // The tty a caller claims, made to look like more fields of the audit line, adds none.
        let run = try b.pamtester(items: ["tty=/dev/pts/77 rhost=- peer=0"])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertTrue(run.stdout.contains(PAMResult.success), run.stdout)
        XCTAssertTrue(run.stdout.contains("place your finger"), "the caller is told what to do: \(run.stdout)")
        let entry = try XCTUnwrap(try b.pamAudit(count: 1).first)
        XCTAssertEqual(entry.uid, b.uid, "the entry is the user's, not the asking root's")
        XCTAssertTrue(entry.result.hasPrefix("success (success(biometric))"), entry.result)
        XCTAssertEqual(
            entry.app,
            "peer=0 session=\(b.session) service=\(b.service) user=\(b.user) tty=/dev/pts/77%20rhost%3D-%20peer%3D0 rhost="
        )
    }

    /// Nothing is offered where no one may be at this machine's reader, and the next module asks
    /// at once: outside any login session (sshd before authentication), in a remote session (SSH,
    /// whatever the module is told), with another host named. None of them takes the queued
    /// touch. sudo names this machine itself as the remote host: that is local.
    func testNothingIsOfferedOutsideALocalSessionAtASeat() throws {
        let b = try makeBench()
        let remote = b.session + "r"
        try b.stateSession(remote, remote: true, seat: nil)
        let seatless = b.session + "s"
        try b.stateSession(seatless, remote: false, seat: nil)
        // Attack: `su` (setuid root) for the bench user from another user's session at the seat —
        // the one at the reader is that other user, who would burn the bench user's counters.
        let others = b.session + "o"
        try b.stateSession(others, remote: false, seat: "seat0", owner: try b.otherUser().uid)
        XCTAssertEqual(try b.asUser(["simulate", "match"]).status, 0)
        let runs: [(String, ProcessOutput)] = [
            ("no login session", try b.pamtester(session: .some(nil))),
            ("a remote session", try b.pamtester(session: remote)),
            ("a session without a seat", try b.pamtester(session: seatless)),
            ("another host named", try b.pamtester(items: ["rhost=203.0.113.9"])),
            ("root in another user's session (su)", try b.pamtester(session: others)),
        ]
        for (what, run) in runs {
            XCTAssertNotEqual(run.status, 0, what)
            XCTAssertTrue(run.stderr.contains(PAMResult.unavailable), "\(what): \(run.stderr)")
        }
        XCTAssertTrue(try b.userStatus().contains("\"queuedEvents\" : 1"), "no prompt took the touch")
        XCTAssertTrue(
            b.enclave.log().contains("the session at the seat is another user's"),
            "su's was refused for that"
        )

        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, 255)
        let host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let local = try b.pamtester(items: ["rhost=\(host.uppercased())"])
        XCTAssertEqual(local.status, 0, "sudo's own host name is local: \(local.stderr)")
        // What was stepped aside from before anything was offered is logged, not audited: sshd
        // passes every network attempt here, which would otherwise rotate a user's entries out.
        let audit = try b.pamAudit(count: 1)
        XCTAssertEqual(audit.count, 1, "\(audit)")
        XCTAssertTrue(audit.first?.result.hasPrefix("success") == true, "\(audit)")
    }

    /// Attack: a user's process asks the daemon to authenticate another user — to test their
    /// finger, or to burn their counters into a lockout. Refused (PAM_PERM_DENIED) and logged,
    /// under the asker's uid; the victim's queue and counters are untouched.
    func testAnotherUsersProcessMayNotAsk() throws {
        let b = try makeBench()
        let other = try b.otherUser()
        XCTAssertEqual(try b.asUser(["simulate", "nomatch"]).status, 0)
        let attack = try b.pamtester(runAs: other.name)
        XCTAssertNotEqual(attack.status, 0)
        XCTAssertTrue(attack.stderr.contains(PAMResult.permissionDenied), attack.stderr)
        let status = try b.userStatus()
        XCTAssertTrue(status.contains("\"queuedEvents\" : 1"), status)
        XCTAssertTrue(status.contains("\"biometricFailures\" : 0"), status)
        let refused = try XCTUnwrap(try b.pamAudit(count: 1).first)
        XCTAssertTrue(refused.result.hasPrefix("refused"), refused.result)
        XCTAssertTrue(refused.app.hasPrefix("peer=\(other.uid) "), refused.app)
        XCTAssertEqual(refused.uid, other.uid, "the asker's entry: no one fills another's log")
        XCTAssertTrue(b.enclave.log().contains("PAM authentication refused"))

        // A name that is no local user is only unavailable: nothing tells which users exist.
        let unknown = try b.pamtester("nosuch\(b.suffix)")
        XCTAssertTrue(unknown.stderr.contains(PAMResult.unavailable), unknown.stderr)
    }

    /// Finger or password at once, on the daemon's own prompt on the caller's terminal: the login
    /// password typed while the sensor is armed (a wrong one says so and the finger still works),
    /// then, on the next run, a touch ends the prompt at once — no Enter after it.
    func testThePasswordOrTheFingerOnTheTerminal() throws {
        guard TmuxTerminal.available else { throw XCTSkip("needs tmux") }
        let b = try makeBench()
        let typed = try b.pamtesterOnTerminal()
        typed.terminal.waitFor("or type your password")
        typed.terminal.waitFor("[type the password + Enter")
        try typed.terminal.type("not-my-password")
        try typed.terminal.press("Enter")
        typed.terminal.waitFor("Wrong password. Try again. — or use Touch ID")
        try typed.terminal.type(b.password)
        try typed.terminal.press("Enter")
        XCTAssertEqual(typed.exitStatus(), 0, typed.output + typed.errors + typed.terminal.screen())
        XCTAssertTrue(typed.output.contains(PAMResult.success), typed.output)
        XCTAssertTrue(try b.pamAudit(count: 1).first?.result.hasPrefix("success (success(passcode))") == true)
        XCTAssertFalse(b.enclave.log().contains(b.password), "the password never reaches the log")

        let touched = try b.pamtesterOnTerminal()
        touched.terminal.waitFor("Ctrl-T matching touch")
        try touched.terminal.press("C-t")
        XCTAssertEqual(touched.exitStatus(), 0, touched.errors + touched.terminal.screen())
        XCTAssertTrue(try b.pamAudit(count: 2).first?.result.hasPrefix("success (success(biometric))") == true)
    }

    /// Only the stack's "wrong" is a wrong password. The right password whose account the stack
    /// then refuses (an expired account; likewise pam_unix run where it may not read the hashes,
    /// or a module's error) is no verdict on it: the prompt ends unavailable and nothing is
    /// counted. Before, every refusal of PAM's was "Wrong password", counted toward the delays and
    /// the durable lockout — a right password burning the user's counter.
    func testAnAnswerPAMCannotJudgeIsNotCountedAsAWrongPassword() throws {
        guard TmuxTerminal.available else { throw XCTSkip("needs tmux") }
        let b = try makeBench(loginStack: "auth required pam_unix.so nodelay\naccount required pam_deny.so\n")
        let run = try b.pamtesterOnTerminal()
        run.terminal.waitFor("or type your password")
        try run.terminal.type(b.password)
        try run.terminal.press("Enter")
        XCTAssertNotNil(run.exitStatus(), "the prompt stayed open: \(run.terminal.screen())")
        XCTAssertFalse(run.terminal.screen().contains("Wrong password"), run.terminal.screen())
        XCTAssertTrue(run.errors.contains(PAMResult.unavailable), run.errors)
        let ended = try XCTUnwrap(try b.pamAudit(count: 1).first?.result)
        XCTAssertTrue(ended.hasPrefix("unavailable (systemCancel(-4): the account:"), ended)
    }

    /// `timeout=`: the daemon ends its prompt itself and gives the terminal back before it
    /// answers, so the next module's password prompt finds it as it was (echo on, cooked) — a
    /// module that gave up first would race the daemon's restoring of the terminal.
    func testATimedOutPromptGivesTheTerminalBackBeforeTheAnswer() throws {
        guard TmuxTerminal.available else { throw XCTSkip("needs tmux") }
        let b = try makeBench(options: "timeout=2")
        let run = try b.pamtesterOnTerminal(afterwards: "stty -a")
        run.terminal.waitFor("or type your password")
        run.terminal.waitFor("The prompt timed out (2 s).")
        XCTAssertNotNil(run.exitStatus())
        XCTAssertTrue(run.errors.contains(PAMResult.unavailable), run.errors)
        let modes = run.output.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == ";" })
        XCTAssertTrue(modes.contains("echo") && modes.contains("icanon"), "the terminal as it was: \(run.output)")
        XCTAssertTrue(try b.pamAudit(count: 1).first?.result.hasPrefix("unavailable (systemCancel") == true)
    }

    /// The user's own process (a lock screen) gets the finger alone: its password goes to the
    /// next module, so no process of the user's can burn the daemon's counted password.
    func testTheUsersOwnProcessGetsTheFingerAlone() throws {
        guard TmuxTerminal.available else { throw XCTSkip("needs tmux") }
        let b = try makeBench()
        let own = try b.pamtesterOnTerminal(asTheUser: true)
        own.terminal.waitFor("place your finger on the sensor")
        XCTAssertFalse(own.terminal.screen().contains("password"), own.terminal.screen())
        try own.terminal.press("C-t")
        XCTAssertEqual(own.exitStatus(), 0, own.errors + own.terminal.screen())
        let entry = try XCTUnwrap(try b.pamAudit(count: 1).first)
        XCTAssertTrue(entry.app.contains("peer=\(b.uid)"), entry.app)
    }

    /// The lockout is the one apps have: three missed fingers move the prompt to the password,
    /// Esc cancels (PAM_AUTH_ERR); two more lock the finger out (5 in all) and the password still
    /// passes; the next prompt asks the password alone, the finger locked until the device
    /// passcode lifts it (the login password is not the device passcode).
    func testFiveMissedFingersThenThePassword() throws {
        guard TmuxTerminal.available else { throw XCTSkip("needs tmux") }
        let b = try makeBench()
        let first = try b.pamtesterOnTerminal()
        try miss(3, on: first.terminal, bench: b, from: 0)
        first.terminal.waitFor("Enter your password")
        try first.terminal.press("Escape")
        XCTAssertNotEqual(first.exitStatus(), 0)
        XCTAssertTrue(first.errors.contains(PAMResult.authError), first.errors)
        XCTAssertTrue(try b.pamAudit(count: 1).first?.result.hasPrefix("cancelled") == true)

        let second = try b.pamtesterOnTerminal()
        try miss(2, on: second.terminal, bench: b, from: 3)
        second.terminal.waitFor("Enter your password")
        XCTAssertTrue(try b.userStatus().contains("\"biometryLockout\""), "five misses lock the finger out")
        try second.terminal.type(b.password)
        try second.terminal.press("Enter")
        XCTAssertEqual(second.exitStatus(), 0, second.errors + second.terminal.screen())

        let third = try b.pamtesterOnTerminal()
        third.terminal.waitFor("Enter your password")
        XCTAssertFalse(third.terminal.screen().contains("place your finger"), third.terminal.screen())
        // Guessing: the fifth wrong password delays the next (the login-password counter), and
        // with the finger locked too nothing can pass: the next request is locked at once
        // (PAM_MAXTRIES, which the stack line makes final), whatever module comes next.
        for n in 1...6 {
            try third.terminal.type("guess-\(n)")
            try third.terminal.press("Enter")
        }
        third.terminal.waitFor("Password entry is delayed")
        try third.terminal.press("Escape")
        XCTAssertNotEqual(third.exitStatus(), 0)
        let locked = try b.pamtesterOnTerminal()
        XCTAssertNotEqual(locked.exitStatus(), 0)
        XCTAssertTrue(locked.errors.contains(PAMResult.maxTries), locked.output + locked.errors)
        XCTAssertTrue(locked.errors.contains("password entry is delayed"), "the person is told why: \(locked.errors)")
        XCTAssertTrue(try b.pamAudit(count: 4).first?.result.hasPrefix("locked") == true)
        // Where no password can be typed (no terminal, no agent), the locked finger only hands over.
        XCTAssertTrue(try b.pamtester().stderr.contains(PAMResult.unavailable))
    }

    /// `count` missed touches, each waited for (a touch on an unread one is not a second touch).
    private func miss(_ count: Int, on terminal: TmuxTerminal, bench b: PAMModuleBench, from done: Int) throws {
        terminal.waitFor("Ctrl-N non-matching touch")
        for n in 1...count {
            try terminal.press("C-n")
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline, !(try b.userStatus().contains("\"biometricFailures\" : \(done + n)")) {
                usleep(50_000)
            }
        }
    }

    /// pam_faillock in the stack as its man page lays it out, the module between `preauth` and
    /// `authfail` (jumping past pam_unix and `authfail` to `authsucc` on success): a touch is
    /// never counted as a failure and clears faillock's tally; the module stepping aside (no
    /// touch in time) is not counted either, only pam_unix's wrong password is; and once
    /// faillock has locked the account, `preauth` ends the stack before the module is asked, so
    /// a finger cannot route around faillock's lock (nor a password around ours: `maxtries=die`).
    func testPamFaillockCountsNoFingerAsAFailure() throws {
        let b = try makeBench()
        let tally = b.logind + "/faillock"
        let faillock = "pam_faillock.so dir=\(tally) deny=3 unlock_time=600"
        let service = "laenclave-faillock-\(b.suffix)"
        try """
        auth requisite \(faillock) preauth
        auth [success=2 default=ignore maxtries=die] \(try PAMModuleBench.module()) socket=\(b.enclave.socketPath) timeout=1
        auth [success=1 default=ignore] pam_unix.so nodelay
        auth [default=die] \(faillock) authfail
        auth sufficient \(faillock) authsucc
        account required pam_permit.so

        """.write(toFile: "/etc/pam.d/\(service)", atomically: true, encoding: .utf8)
        defer { unlink("/etc/pam.d/\(service)") }
        func failures() throws -> Int {
            let out = try runProcess("/usr/sbin/faillock", ["--dir", tally, "--user", b.user]).stdout
            return out.split(separator: "\n").filter { $0.first?.isNumber == true }.count
        }

        XCTAssertEqual(try b.asUser(["simulate", "match"]).status, 0)
        XCTAssertEqual(try b.pamtester(service: service).status, 0)
        XCTAssertEqual(try failures(), 0, "a touch is not a failure")

        let wrong = try b.pamtester(service: service, input: "not-\(b.password)\n")
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.stderr.contains("Password:"), "pam_unix asked: \(wrong.stdout + wrong.stderr)")
        XCTAssertEqual(try failures(), 1, "pam_unix's wrong password only, not the module stepping aside")

        XCTAssertEqual(try b.asUser(["simulate", "match"]).status, 0)
        XCTAssertEqual(try b.pamtester(service: service).status, 0)
        XCTAssertEqual(try failures(), 0, "a touch clears faillock's tally (authsucc)")

        for _ in 1...3 { _ = try b.pamtester(service: service, input: "not-\(b.password)\n") }
        XCTAssertEqual(try failures(), 3)
        let asked = try b.pamAudit(count: 6).count
        XCTAssertEqual(try b.asUser(["simulate", "match"]).status, 0)
        let locked = try b.pamtester(service: service)
        XCTAssertNotEqual(locked.status, 0, "faillock's lock holds for the finger too: \(locked.stdout)")
        XCTAssertFalse(locked.stdout.contains("place your finger"), locked.stdout)
        XCTAssertEqual(try b.pamAudit(count: asked + 1).count, asked, "the module was not asked")
    }

    /// `reuse=SECONDS`: a lock screen that runs PAM again after a touch, or `sudo -k` then sudo,
    /// passes without a second prompt — for the same service, terminal and session only. With
    /// nothing to answer, `timeout=` ends the wait as unavailable.
    func testAReuseWindowServesTheSameServiceOnly() throws {
        let b = try makeBench(options: "reuse=60 timeout=3")
        XCTAssertEqual(try b.asUser(["simulate", "match"]).status, 0)
        XCTAssertEqual(try b.pamtester().status, 0)
        let again = try b.pamtester()
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(try b.pamAudit(count: 2).first?.result.hasPrefix("success (success(reused))") == true)
        // Nor does an app reuse sudo's touch (the request authorizes nothing of an app's).
        let app = try b.asUser([
            "authenticate", "--policy", "biometrics", "--reuse-duration", "60", "--no-interaction", "--reason", "Reuse",
        ])
        XCTAssertEqual(app.status, 30, "notInteractive: the app's own rules still ask: \(app.stdout)\(app.stderr)")

        let lockScreen = "laenclave-lock-\(b.suffix)"
        try b.writeModuleService(lockScreen, options: "reuse=60 timeout=3")
        let other = try b.pamtester(service: lockScreen)
        XCTAssertTrue(other.stderr.contains(PAMResult.unavailable), "another service reuses nothing: \(other.stderr)")
    }

    /// Real sudo (setuid, its own conversation and retries) as the user on a terminal: a touch on
    /// the daemon's prompt passes, so does the login password typed while the sensor is armed;
    /// `sudo -k` within the reuse window passes without a prompt; with the daemon stopped the
    /// module steps aside and sudo's own password prompt (pam_unix) takes the password.
    func testRealSudoWithAFingerOrThePasswordAtOnce() throws {
        guard TmuxTerminal.available, FileManager.default.isExecutableFile(atPath: "/usr/bin/sudo"),
            FileManager.default.isExecutableFile(atPath: "/usr/sbin/visudo")
        else { throw XCTSkip("needs tmux and sudo") }
        let b = try makeBench()
        let sudo = "laenclave-sudo-\(b.suffix)"
        try b.sudoService(sudo, options: "reuse=30")

        // sudo, then `sudo -k` and sudo again on the same terminal: the second passes on the
        // first's touch, within the reuse window.
        let touched = try b.asUserOnTerminal("sh -c 'sudo true && sudo -k && sudo true'")
        touched.terminal.waitFor("\(sudo) asks to authenticate \(b.user)")
        touched.terminal.waitFor("or type your password")
        try touched.terminal.press("C-t")
        XCTAssertEqual(touched.exitStatus(), 0, touched.errors + touched.terminal.screen())
        let audit = try b.pamAudit(count: 2)
        XCTAssertEqual(audit.count, 2, "\(audit)")
        XCTAssertTrue(audit.first?.result.hasPrefix("success (success(reused))") == true, "\(audit)")
        XCTAssertTrue(audit.last?.result.hasPrefix("success (success(biometric))") == true, "\(audit)")
        let origin = try XCTUnwrap(audit.first?.app)
        XCTAssertTrue(origin.contains("service=\(sudo) ") && origin.contains("tty=/dev/pts/"), origin)

        try b.sudoService(sudo, options: "")
        let typed = try b.asUserOnTerminal("sudo true")
        typed.terminal.waitFor("or type your password")
        try typed.terminal.type(b.password)
        try typed.terminal.press("Enter")
        XCTAssertEqual(typed.exitStatus(), 0, typed.errors + typed.terminal.screen())
        XCTAssertTrue(try b.pamAudit(count: 3).first?.result.hasPrefix("success (success(passcode))") == true)

        b.enclave.stop()
        let fallback = try b.asUserOnTerminal("sudo true")
        fallback.terminal.waitFor("password for \(b.user)")
        try fallback.terminal.type(b.password)
        try fallback.terminal.press("Enter")
        XCTAssertEqual(fallback.exitStatus(), 0, fallback.errors + fallback.terminal.screen())
    }

    /// The module's prompt then sudo's own (pam_unix's) on one terminal, the race a module that
    /// hands its terminal over must not lose: after Esc on the daemon's prompt, and after it timed
    /// out, sudo asks at once and the password typed there is not echoed — the daemon had given
    /// the terminal back (its modes restored) before the module answered, so it cannot turn echo
    /// back on under sudo's prompt.
    func testSudosOwnPromptAfterTheModuleDoesNotEchoThePassword() throws {
        guard TmuxTerminal.available, FileManager.default.isExecutableFile(atPath: "/usr/bin/sudo"),
            FileManager.default.isExecutableFile(atPath: "/usr/sbin/visudo")
        else { throw XCTSkip("needs tmux and sudo") }
        let b = try makeBench()
        let sudo = "laenclave-sudo-\(b.suffix)"
        try b.sudoService(sudo, options: "timeout=1")
        for (round, escape) in [true, false, true, false].enumerated() {
            let run = try b.asUserOnTerminal("sudo true")
            run.terminal.waitFor("or type your password")
            if escape { try run.terminal.press("Escape") }
            run.terminal.waitFor("password for \(b.user)")
            // A person types a moment after the prompt shows: time for a late restore to land.
            usleep(500_000)
            try run.terminal.type(b.password)
            try run.terminal.press("Enter")
            XCTAssertEqual(run.exitStatus(), 0, "round \(round): " + run.errors + run.terminal.screen())
            XCTAssertFalse(
                run.terminal.screen().contains(b.password),
                "echoed in round \(round): \(run.terminal.screen())"
            )
        }
    }

    /// A caller without a terminal (polkit's helper, a lock screen) on a seat where the user's
    /// prompt agent runs: the daemon draws its prompt in the agent's window, where the person
    /// types the login password (or touches the reader); the caller learns only the answer.
    /// Where no agent draws, the finger alone can answer and the wait is short (10 s).
    func testAGraphicalCallerGetsThePromptInTheAgentsWindow() throws {
        guard VirtualDisplay.available else { throw XCTSkip("needs Xvfb and xdotool (scripts/setup-debian)") }
        let b = try makeBench(agent: true)
        let display = try VirtualDisplay()
        let agent = try b.startAgent(on: display)
        defer { agent.stop() }
        let arguments = b.pamtesterArguments()
        let run = try b.passwordInTheAgentsWindow(arguments, on: display, agent: agent)
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr + agent.output)
        XCTAssertFalse(run.stdout.contains("place your finger"), "the agent drew it, not the caller: \(run.stdout)")
        XCTAssertTrue(try b.pamAudit(count: 1).first?.result.hasPrefix("success (success(passcode))") == true)

        // The agent going away with the prompt open ends it: its password was offered there only,
        // and a prompt drawn nowhere would wait for a password nobody can type.
        let second = Background { try PAMModuleBench.runPamtester(arguments) }
        XCTAssertNotNil(display.waitForWindow(titled: "confirm it is you"), agent.output)
        agent.stop()
        let orphaned = try second.wait()
        XCTAssertTrue(orphaned.stderr.contains(PAMResult.unavailable), orphaned.stdout + orphaned.stderr)
        let gone = try XCTUnwrap(try b.pamAudit(count: 2).first?.result)
        XCTAssertTrue(gone.hasPrefix("unavailable (systemCancel(-4): The prompt agent went away."), gone)

        let deadline = Date().addingTimeInterval(10)
        while !b.enclave.log().contains("prompt agent left"), Date() < deadline { usleep(50_000) }
        let headless = try b.pamtester()
        XCTAssertTrue(headless.stderr.contains(PAMResult.unavailable), headless.stdout + headless.stderr)
        XCTAssertTrue(headless.stdout.contains("place your finger"), headless.stdout)
        XCTAssertFalse(headless.stdout.contains("password"), "nowhere to type one: \(headless.stdout)")
        // The daemon ended the prompt at the short wait where only a finger can answer.
        let ended = try XCTUnwrap(try b.pamAudit(count: 3).first?.result)
        XCTAssertTrue(ended.hasPrefix("unavailable (systemCancel(-4): The prompt timed out (10 s)."), ended)
    }

    /// Never a machine nobody can log into: no daemon, a daemon that never answers, and an
    /// impostor at the socket (a user's process answering "success" to everything) are all
    /// unavailable, so the next module asks. The same impostor run by root is believed — the
    /// control that shows the test can tell.
    func testNoDaemonASilentOneOrAnImpostorIsUnavailable() throws {
        let b = try makeBench()
        let directory = NSTemporaryDirectory() + "pam-impostor-\(b.suffix)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o777)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let absent = "laenclave-absent-\(b.suffix)"
        try b.writeModuleService(absent, options: "", socket: directory + "/none")
        XCTAssertTrue(try b.pamtester(service: absent).stderr.contains(PAMResult.unavailable))

        let silent = directory + "/silent"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(silent.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(listener, 8), 0)
        let mute = "laenclave-silent-\(b.suffix)"
        try b.writeModuleService(mute, options: "", socket: silent)
        XCTAssertTrue(try b.pamtester(service: mute).stderr.contains(PAMResult.unavailable))

        let other = try b.otherUser()
        let impostor = "laenclave-impostor-\(b.suffix)"
        let userSocket = directory + "/user"
        try b.writeModuleService(impostor, options: "", socket: userSocket)
        let byUser = try Impostor(socket: userSocket, runAs: other.name)
        defer { byUser.stop() }
        let fooled = try b.pamtester(service: impostor)
        XCTAssertTrue(
            fooled.stderr.contains(PAMResult.unavailable),
            "a user's process is not the daemon: \(fooled.stdout)"
        )

        let rootSocket = directory + "/root"
        let byRoot = try Impostor(socket: rootSocket, runAs: nil)
        defer { byRoot.stop() }
        try b.writeModuleService(impostor, options: "", socket: rootSocket)
        let believed = try b.pamtester(service: impostor)
        XCTAssertEqual(believed.status, 0, "root's answers are believed: \(believed.stderr)")
    }
}

/// A process at a socket that answers every request as laenclaved would answer the module, with
/// "success" — python3, as `runAs` (nil: root).
private final class Impostor {
    private let process = Process()

    init(socket: String, runAs user: String?) throws {
        let script = """
            import json, os, socket, struct, sys
            s = socket.socket(socket.AF_UNIX)
            s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(4)
            print("ready", flush=True)
            while True:
                c, _ = s.accept()
                try:
                    while True:
                        head = c.recv(4, socket.MSG_WAITALL)
                        if len(head) < 4: break
                        request = json.loads(c.recv(struct.unpack(">I", head)[0], socket.MSG_WAITALL))
                        op, i = request["op"], request["id"]
                        if op == "hello": reply = {"kind": "hello", "value": {"version": 1, "mode": "system", "uid": 0, "app": "x"}}
                        elif op == "handoff": reply = {"kind": "failure", "value": {"code": "busy", "message": "no"}}
                        else: reply = {"kind": "pamAuthenticated", "value": {"outcome": "success", "message": "yes"}}
                        body = json.dumps({"id": i, "reply": reply}).encode()
                        c.sendall(struct.pack(">I", len(body)) + body)
                except Exception:
                    pass
                c.close()
            """
        let arguments = ["python3", "-c", script, socket]
        process.executableURL = URL(fileURLWithPath: user == nil ? "/usr/bin/env" : "/usr/sbin/runuser")
        process.arguments = user.map { ["-u", $0, "--"] + arguments } ?? arguments
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        // python3 says "ready" at once, or ends (end of file): no wait is unbounded.
        let ready = out.fileHandleForReading.availableData
        guard String(decoding: ready, as: UTF8.self).contains("ready") else {
            stop()
            throw PAMModuleBench.BenchError("the impostor did not start")
        }
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}
