import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

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
}
