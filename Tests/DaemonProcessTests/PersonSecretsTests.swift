import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import Security
import XCTest

/// Administration allowed by the person on the trusted prompt: lactl in a tmux terminal hands the
/// terminal over, the daemon says what is being allowed and reads the passcode there; lactl never
/// reads it.
final class PersonSecretsTests: XCTestCase {
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

    private func lactl(_ arguments: String) throws -> TerminalCommand {
        try TerminalCommand.lactl(arguments, on: enclave)
    }

    func testTheDaemonSaysWhatIsAllowedAndReadsThePasscodeOnTheTerminal() throws {
        enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "listed",
                        kSecValueData as String: Data("secret".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        let lactl = try lactl("keychain list")
        let terminal = lactl.terminal
        terminal.waitFor("Allow it to list the keychain items of every app of yours")
        terminal.waitFor("Enter the device passcode to allow it")
        try terminal.type("1234")
        try terminal.press("Enter")
        XCTAssertEqual(lactl.exitStatus(), 0, lactl.errors + terminal.screen())
        XCTAssertTrue(lactl.output.contains("genp"), lactl.output)
        XCTAssertFalse(terminal.screen().contains("1234"), terminal.screen())
    }

    func testChangingThePasscodeAsksThreeTimesOnOnePrompt() throws {
        let lactl = try lactl("passcode change")
        let terminal = lactl.terminal
        terminal.waitFor("Allow it to change the device passcode")
        terminal.waitFor("Enter the current passcode")
        try terminal.type("1234")
        try terminal.press("Enter")
        terminal.waitFor("Choose the new passcode")
        try terminal.type("246810")
        try terminal.press("Enter")
        terminal.waitFor("Enter the new passcode again")
        try terminal.type("246810")
        try terminal.press("Enter")
        XCTAssertEqual(lactl.exitStatus(), 0, lactl.errors + terminal.screen())
        // The new passcode opens the next administration; the old one no longer does.
        XCTAssertNoThrow(try enclave.administer(.keychainList, secrets: ["246810"]))
        XCTAssertThrowsError(try enclave.administer(.keychainList, secrets: ["1234"]))
    }

    func testThePersonCanRefuse() throws {
        let lactl = try lactl("keychain share team /usr/bin/true")
        let terminal = lactl.terminal
        terminal.waitFor("let these apps share the keychain items of the group \"team\": /usr/bin/true")
        try terminal.press("Escape")
        XCTAssertEqual(lactl.exitStatus(), 1, lactl.errors)
        XCTAssertTrue(lactl.errors.contains("did not allow"), lactl.errors)
        guard case .accessGroups(let groups) = try enclave.administer(.accessGroups, secrets: ["1234"]) else {
            return XCTFail()
        }
        XCTAssertTrue(groups.isEmpty, "\(groups)")
    }

    /// The app goes away while the daemon asks for the passcode: the prompt ends at once and the
    /// terminal is left as it was (before, the prompt stayed up until its timeout, its connection
    /// unread behind it).
    func testAClientThatGoesAwayEndsThePromptAtOnce() throws {
        let lactl = try lactl("keychain list")
        let terminal = lactl.terminal
        terminal.waitFor("Enter the device passcode to allow it")
        let killed = try runProcess(
            "/usr/bin/pkill",
            ["-KILL", "-f", "lactl keychain list --socket \(enclave.socketPath)"]
        )
        XCTAssertEqual(killed.status, 0, "lactl was running")
        terminal.waitFor("└─ ended", timeout: 5)
        XCTAssertNotNil(lactl.exitStatus(), "the shell went on after lactl")
        // The terminal is back in its own mode: what is typed now is echoed by the terminal again.
        try terminal.type("echoed-again")
        terminal.waitFor("echoed-again", timeout: 5)
    }
}
