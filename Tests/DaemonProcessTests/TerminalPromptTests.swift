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
    private var directory: String!

    override func setUpWithError() throws {
        guard TmuxTerminal.available else { throw XCTSkip("needs tmux for a terminal") }
        enclave = try TestEnclave()
        directory = enclave.directory
    }

    /// `lactl authenticate` in the terminal, its outcome and exit status into files.
    private func authenticate(policy: String = "owner", ignoringHangUp: Bool = false) throws -> TmuxTerminal {
        let lactl = productPath("lactl")
        let run = "'\(lactl)' authenticate --socket '\(enclave.socketPath)' --policy \(policy) --reason 'Unlock the vault' --json"
        let trap = ignoringHangUp ? "trap '' HUP; " : ""
        return try TmuxTerminal("\(trap)\(run) > '\(directory!)/out' 2> '\(directory!)/err'; echo $? > '\(directory!)/status'; sleep 60")
    }

    private func exitStatus(timeout: Double = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: directory + "/status", encoding: .utf8), let n = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                return n
            }
            usleep(50_000)
        }
        return nil
    }

    private func output() -> String { (try? String(contentsOfFile: directory + "/out", encoding: .utf8)) ?? "" }

    func testThePasscodeIsTypedIntoTheDaemonsPromptAndTheAppGetsTheAnswer() throws {
        let terminal = try authenticate()
        terminal.waitFor("wants to confirm it is you")
        terminal.waitFor("Unlock the vault")
        if !terminal.screen().contains("type the passcode") { try terminal.press("C-f") }
        terminal.waitFor("type the passcode")
        try terminal.type("1234")
        try terminal.press("Enter")
        XCTAssertEqual(exitStatus(), 0, output() + terminal.screen())
        terminal.waitFor("└─ authenticated")
        XCTAssertFalse(terminal.screen().contains("1234"), "typed with echo off:\n\(terminal.screen())")
        let json = try JSONSerialization.jsonObject(with: Data(output().utf8)) as? [String: Any]
        XCTAssertEqual(json?["success"] as? Bool, true, output())
        guard case .audit(let entries) = try enclave.administer(.audit(limit: 20, everyApp: true), secrets: ["1234"]) else { return XCTFail() }
        XCTAssertTrue(entries.contains { $0.app.hasSuffix("/lactl") && $0.operation == "evaluate" && $0.result == "success(passcode)" }, "\(entries)")
    }

    func testAWrongPasscodeOnTheTerminalCountsAndEscapeCancels() throws {
        let terminal = try authenticate()
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
        XCTAssertEqual(exitStatus(), 12, "10 + |userCancel|: " + output() + terminal.screen())
        XCTAssertTrue(output().contains("userCancel"), output())
    }

    /// The terminal goes away mid-prompt (its window closed): the evaluation ends with a clear
    /// error at once, the prompt is free for the next app, and nothing is counted.
    func testATerminalThatClosesMidPromptEndsTheEvaluation() throws {
        let terminal = try authenticate(ignoringHangUp: true)
        terminal.waitFor("wants to confirm it is you")
        terminal.stop()
        XCTAssertEqual(exitStatus(), 14, "10 + |systemCancel|: " + output())
        XCTAssertTrue(output().contains("terminal"), output())
        let status = try enclave.status()
        XCTAssertFalse(status.promptOpen)
        XCTAssertEqual(status.passcodeFailures, 0)
        XCTAssertEqual(status.biometricFailures, 0)
    }
}
