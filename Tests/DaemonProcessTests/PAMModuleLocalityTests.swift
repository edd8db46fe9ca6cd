import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Where the person is, as the module's requests show it beyond the requesting process's own
/// session: who is attached to the tmux server a request's terminal belongs to, and the session a
/// terminal of the user's service manager (GNOME's, KDE's) stands in.
final class PAMModuleLocalityTests: XCTestCase {
    private var bench: PAMModuleBench?

    override func tearDown() {
        bench?.stop()
        bench = nil
    }

    /// sudo's request from a tmux pane (a server started at the seat): with a client attached at
    /// the seat, the finger or the password; with a client attached over SSH as well, the
    /// password alone — whoever types may not be at this machine, and a touch at its reader must
    /// not answer for them.
    func testATmuxAttachedOverSSHTakesTheFingerAway() throws {
        guard TmuxTerminal.available else { throw XCTSkip("needs tmux") }
        let b = try PAMModuleBench()
        bench = b
        let remote = b.session + "r"
        try b.stateSession(remote, remote: true, seat: nil)

        // A client at the seat: the finger is offered.
        let local = try run(b)
        let atTheSeat = try attach(to: local.terminal, session: b.session, bench: b)
        defer { atTheSeat.stop() }
        local.go()
        local.command.terminal.waitFor("or type your password")
        try local.command.terminal.press("C-t")
        XCTAssertEqual(local.command.exitStatus(), 0, local.command.errors + local.command.terminal.screen())
        XCTAssertTrue(try b.pamAudit(count: 1).first?.result.hasPrefix("success (success(biometric))") == true)

        // One client at the seat, one over SSH: the password alone.
        let far = try run(b)
        let seat = try attach(to: far.terminal, session: b.session, bench: b)
        defer { seat.stop() }
        let ssh = try attach(to: far.terminal, session: remote, bench: b)
        defer { ssh.stop() }
        far.go()
        far.command.terminal.waitFor("Enter your password")
        XCTAssertFalse(far.command.terminal.screen().contains("Touch ID"), far.command.terminal.screen())
        try far.command.terminal.press("C-t")
        try far.command.terminal.type(b.password)
        try far.command.terminal.press("Enter")
        XCTAssertEqual(far.command.exitStatus(), 0, far.command.errors + far.command.terminal.screen())
        XCTAssertTrue(try b.pamAudit(count: 2).first?.result.hasPrefix("success (success(passcode))") == true)
    }

    /// A process of the user's service manager (GNOME Shell's polkit agent starts the helper
    /// there) is in no session: it stands in the user's display session as logind names it, and
    /// is served only where the prompt agent draws on the seat — anything of the user's, a job
    /// scheduled over SSH as well, may run in the service manager.
    func testAServiceManagersProcessIsServedThroughThePromptAgentOnly() throws {
        guard VirtualDisplay.available else { throw XCTSkip("needs Xvfb and xdotool (scripts/setup-debian)") }
        let b = try PAMModuleBench(agent: true)
        bench = b
        let cgroup = try b.serviceManagerCgroup()
        let arguments = [
            "-w", "/bin/sh", "-c", b.inCgroup(cgroup, "exec pamtester '\(b.service)' '\(b.user)' authenticate"),
        ]
        let none = try PAMModuleBench.runPamtester(arguments)
        XCTAssertTrue(none.stderr.contains(PAMResult.unavailable), "no display session: \(none.stdout + none.stderr)")

        try b.stateUser(display: b.session)
        let undrawn = try PAMModuleBench.runPamtester(arguments)
        XCTAssertTrue(undrawn.stderr.contains(PAMResult.unavailable), "no agent: \(undrawn.stdout + undrawn.stderr)")
        XCTAssertTrue(b.enclave.log().contains("no prompt agent or terminal on the seat"), "said why")

        let display = try VirtualDisplay()
        let agent = try b.startAgent(on: display)
        defer { agent.stop() }
        let drawn = try b.passwordInTheAgentsWindow(arguments, on: display, agent: agent)
        XCTAssertEqual(drawn.status, 0, drawn.stdout + drawn.stderr + agent.output)
        let entry = try XCTUnwrap(try b.pamAudit(count: 1).first)
        XCTAssertTrue(entry.result.hasPrefix("success (success(passcode))"), entry.result)
        XCTAssertTrue(entry.app.contains(" session=\(b.session) "), entry.app)

        // On a terminal too (sudo in GNOME Terminal): the agent's window on the seat, not the
        // terminal, which anything of the user's may have hidden.
        guard TmuxTerminal.available else { return }
        let directory = NSTemporaryDirectory() + "pamagent-\(b.suffix)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let onTerminal = try TerminalCommand(
            b.inCgroup(cgroup, "pamtester \(b.service) \(b.user) authenticate"),
            in: directory
        )
        let second = try XCTUnwrap(display.waitForWindow(titled: "confirm it is you"), agent.output)
        XCTAssertFalse(onTerminal.terminal.screen().contains("or type your password"), onTerminal.terminal.screen())
        try display.type(b.password, into: second)
        try display.press("Return", in: second)
        XCTAssertEqual(onTerminal.exitStatus(), 0, onTerminal.errors + onTerminal.terminal.screen())
    }

    /// sudo in a terminal the desktop's service manager started (GNOME Terminal, Konsole): served
    /// where the terminal is drawn on the seat — its master held by the emulator that started its
    /// shell, a program root lists, itself of the same service manager. `script` stands in for
    /// the emulator here (root lists it in the test's settings); where root does not list it, the
    /// module steps aside.
    func testATerminalOfTheServiceManagerIsServedWhereAListedEmulatorDrawsIt() throws {
        guard TmuxTerminal.available, FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            throw XCTSkip("needs tmux and script")
        }
        // Unlisted; listed but started outside the user's service manager (only the command in
        // it); listed and of the service manager.
        for (listed, emulatorInside) in [(false, true), (true, false), (true, true)] {
            let b = try PAMModuleBench(settings: listed ? "terminal-holders = /usr/bin/script, /usr/bin/tmux\n" : nil)
            bench = b
            try b.stateUser(display: b.session)
            let cgroup = try b.serviceManagerCgroup()
            let directory = NSTemporaryDirectory() + "pamemu-\(b.suffix)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            // script's own pseudo-terminal relays to its output: the prompt is read there.
            let pamtester = "pamtester \(b.service) \(b.user) authenticate"
            let command =
                emulatorInside
                ? b.inCgroup(cgroup, "script -qfc '\(pamtester)' /dev/null")
                : "script -qfc \"echo \\$\\$ > '\(PAMModuleBench.cgroupRoot!)/\(cgroup)/cgroup.procs' && exec \(pamtester)\" /dev/null"
            let run = try TerminalCommand(command, in: directory)
            if listed && emulatorInside {
                let deadline = Date().addingTimeInterval(20)
                while !run.output.contains("or type your password"), Date() < deadline { usleep(50_000) }
                XCTAssertTrue(run.output.contains("or type your password"), run.output + b.enclave.log())
                try run.terminal.press("C-t")
                XCTAssertEqual(run.exitStatus(), 0, run.output)
                XCTAssertTrue(run.output.contains(PAMResult.success), run.output)
                let entry = try XCTUnwrap(try b.pamAudit(count: 1).first)
                XCTAssertTrue(entry.result.hasPrefix("success (success(biometric))"), entry.result)
                XCTAssertTrue(entry.app.contains(" session=\(b.session) "), entry.app)
            } else {
                XCTAssertNotNil(run.exitStatus(), run.output)
                XCTAssertTrue(run.output.contains(PAMResult.unavailable), run.output)
                XCTAssertTrue(b.enclave.log().contains("no prompt agent or terminal on the seat"), "said why")
            }
            b.stop()
        }
    }

    /// The attack: a user names a cgroup below their own service manager after another user's
    /// session at the seat (`…/user@1001.service/…/x:session-3.scope`; the kernel refuses only
    /// newlines in names) and runs `su victim` from it. Read by the last colon, the cgroup named
    /// the victim's session, so the victim's queued touch answered the attacker's su. The path
    /// starts after the second colon of its line: the attacker stands in their own service
    /// manager, with no display session of theirs, and nothing is offered.
    func testACgroupNamedAfterAnotherUsersSessionStandsInNone() throws {
        let b = try PAMModuleBench()
        bench = b
        let attacker = try b.otherUser()
        let forged = try b.serviceManagerCgroup(owner: attacker.uid, leaf: "x:session-\(b.session).scope")
        XCTAssertEqual(try b.asUser(["simulate", "match"]).status, 0)
        let su = try PAMModuleBench.runPamtester([
            "-w", "/bin/sh", "-c", b.inCgroup(forged, "exec pamtester '\(b.service)' '\(b.user)' authenticate"),
        ])
        XCTAssertTrue(
            su.stderr.contains(PAMResult.unavailable),
            "the victim's touch answered: \(su.stdout + su.stderr)"
        )
        XCTAssertEqual(try b.pamAudit(count: 1).count, 0, "nothing was offered")
    }

    /// pamtester as root on a tmux terminal in the bench's session, held until `go()` (so that
    /// clients attach first).
    private struct HeldRun {
        let command: TerminalCommand
        let gate: String
        var terminal: TmuxTerminal { command.terminal }
        func go() { _ = FileManager.default.createFile(atPath: gate, contents: nil) }
    }

    private func run(_ b: PAMModuleBench) throws -> HeldRun {
        let directory = NSTemporaryDirectory() + "pamlocal-\(b.suffix)-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        let gate = directory + "/go"
        let command = try TerminalCommand(
            b.inSession(
                b.session,
                "sh -c 'while [ ! -e \(gate) ]; do sleep 0.05; done; exec pamtester \(b.service) \(b.user) authenticate'"
            ),
            in: directory
        )
        return HeldRun(command: command, gate: gate)
    }

    /// A tmux client attached to `terminal`'s server from a terminal of its own, in `session`.
    private func attach(to terminal: TmuxTerminal, session: String, bench b: PAMModuleBench) throws -> TmuxTerminal {
        func clients() throws -> Int {
            try runProcess("/usr/bin/tmux", ["-L", terminal.server, "list-clients"]).stdout
                .split(separator: "\n").count
        }
        let before = try clients()
        let client = try TmuxTerminal(b.inSession(session, "exec env -u TMUX tmux -L \(terminal.server) attach -t t"))
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if try clients() > before { return client }
            usleep(50_000)
        }
        throw PAMModuleBench.BenchError("the client did not attach: \(client.screen())")
    }
}
