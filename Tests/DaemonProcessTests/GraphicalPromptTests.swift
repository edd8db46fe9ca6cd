import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The graphical prompt, for real: laenclaved-agent (GTK 4) on an X server of the test's own
/// (Xvfb) serves a test daemon; lactl, an app with no terminal, asks; the person types into the
/// agent's window (xdotool). lactl learns only the outcome.
final class GraphicalPromptTests: XCTestCase {
    private var enclave: TestEnclave!
    private var display: VirtualDisplay!
    private let title = "confirm it is you"

    override func setUpWithError() throws {
        guard VirtualDisplay.available else {
            throw XCTSkip("needs Xvfb, xdotool and ImageMagick (scripts/setup-debian installs them)")
        }
        enclave = try TestEnclave()
        display = try VirtualDisplay()
    }

    override func tearDown() {
        enclave = nil
        display = nil
    }

    /// Starts the agent and waits until the daemon says it draws this session's prompts.
    private func serving(_ executable: String = productPath("laenclaved-agent")) throws -> AgentProcess {
        let agent = try AgentProcess(on: display, enclave: enclave, executable: executable)
        try waitUntilServing(agent)
        return agent
    }

    private func waitUntilServing(_ agent: AgentProcess) throws {
        let deadline = Date().addingTimeInterval(20)
        while try enclave.status().promptAgent != true {
            guard Date() < deadline, agent.process.isRunning else {
                throw VirtualDisplay.DisplayError(description: "the agent did not start serving: \(agent.output)")
            }
            usleep(50_000)
        }
    }

    /// lactl authenticate, without a terminal, on a thread of its own.
    private func authenticate(policy: String = "owner") -> Background {
        Background { [enclave] in
            try runProcess(
                productPath("lactl"),
                [
                    "authenticate", "--policy", policy, "--reason", "Unlock the vault", "--json",
                    "--socket", enclave!.socketPath,
                ],
                timeout: 60
            )
        }
    }

    func testThePasscodeIsTypedIntoTheAgentsWindowAndTheAppGetsTheAnswer() throws {
        let agent = try serving()
        let lactl = authenticate()
        let window = try XCTUnwrap(display.waitForWindow(titled: title), "no prompt window; agent: \(agent.output)")
        // The window is drawn: the screenshot holds text where it is (a blank area has one colour).
        let shot = enclave.directory + "/prompt.png"
        try display.screenshot(to: shot)
        let frame = try display.geometry(of: window)
        XCTAssertGreaterThan(frame.width, 200)
        XCTAssertGreaterThan(
            try VirtualDisplay.colours(in: shot, x: frame.x, y: frame.y, width: frame.width, height: frame.height),
            20,
            "the prompt window is drawn"
        )
        XCTAssertEqual(
            try VirtualDisplay.colours(in: shot, x: 1000, y: 740, width: 20, height: 20),
            1,
            "the rest of the screen is empty"
        )
        try display.type("1234", into: window)
        try display.press("Return", in: window)
        let result = try lactl.wait()
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr + agent.output)
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        XCTAssertEqual(json?["success"] as? Bool, true, result.stdout)
        XCTAssertFalse(
            result.stdout.contains("1234") || result.stderr.contains("1234"),
            "the app never sees the passcode"
        )
        XCTAssertTrue(display.windows(titled: title).isEmpty || waitForNoWindow(), "the window closes with the prompt")
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

    func testEscapeInTheWindowCancelsAndAWrongPasscodeCounts() throws {
        let agent = try serving()
        let lactl = authenticate()
        let window = try XCTUnwrap(display.waitForWindow(titled: title), "no prompt window; agent: \(agent.output)")
        try display.type("0000", into: window)
        try display.press("Return", in: window)
        let deadline = Date().addingTimeInterval(10)
        while try enclave.status().passcodeFailures < 1, Date() < deadline { usleep(50_000) }
        XCTAssertEqual(try enclave.status().passcodeFailures, 1, "the wrong passcode is an attempt")
        try display.press("Escape", in: window)
        let result = try lactl.wait()
        XCTAssertEqual(result.status, 12, "10 + |userCancel|: " + result.stdout + result.stderr)
        XCTAssertTrue(waitForNoWindow(), "the window closes with the prompt")
    }

    /// The agent is killed while its window is up: the prompt moves on (here headless, as lactl
    /// has no terminal) with the screen it had, and the person can still answer.
    func testAKilledAgentHandsThePromptOn() throws {
        let agent = try serving()
        let lactl = authenticate(policy: "biometrics")
        XCTAssertNotNil(display.waitForWindow(titled: title), "no prompt window; agent: \(agent.output)")
        agent.kill()
        try enclave.queue(.match)
        let result = try lactl.wait()
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertEqual(try enclave.status().promptAgent, false)
    }

    /// Another program asks to draw the prompts — it would read every passcode typed. A copy of the
    /// agent at another path is refused and says why; so is the agent's own path bind-mounted over
    /// with another file in a mount namespace of its own (the kernel names the path, the daemon
    /// checks the file).
    func testOnlyTheInstalledAgentMayDrawPrompts() throws {
        let copy = enclave.directory + "/laenclaved-agent"
        try FileManager.default.copyItem(atPath: productPath("laenclaved-agent"), toPath: copy)
        let impostor = try AgentProcess(on: display, enclave: enclave, executable: copy)
        XCTAssertEqual(impostor.exitStatus(), 78, impostor.output)
        XCTAssertTrue(impostor.output.contains("only the prompt agent"), impostor.output)
        XCTAssertEqual(try enclave.status().promptAgent, false)

        if getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") {
            let real = productPath("laenclaved-agent")
            let masked = try AgentProcess(
                on: display,
                enclave: enclave,
                executable: real,
                prefix: [
                    "/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                    "mount --bind \"$0\" \"$1\" && exec \"$@\"", copy,
                ]
            )
            XCTAssertEqual(masked.exitStatus(), 78, masked.output)
            XCTAssertTrue(masked.output.contains("only the prompt agent"), masked.output)
            XCTAssertEqual(try enclave.status().promptAgent, false)
        }
        // The real one serves.
        _ = try serving()
    }

    /// An upgrade replaces the agent's program while it runs, and restarts the daemon: the daemon
    /// refuses the running, deleted program (it is no longer the installed file), and the agent
    /// starts the new one in its place instead of ending — else prompts would quietly go to the
    /// terminal until the next login.
    func testAReplacedAgentStartsItsNewProgramAndServesAgain() throws {
        let bin = NSTemporaryDirectory() + "la-agent-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: bin) }
        let installed = bin + "/laenclaved-agent"
        try FileManager.default.copyItem(atPath: productPath("laenclaved-agent"), toPath: installed)
        enclave = try TestEnclave(.with { $0.extraArguments = ["--prompt-agent", installed] })
        let agent = try serving(installed)
        // dpkg's way: the new file beside, renamed over the old one.
        try FileManager.default.copyItem(atPath: productPath("laenclaved-agent"), toPath: installed + ".new")
        XCTAssertEqual(rename(installed + ".new", installed), 0)
        try enclave.restart()
        try waitUntilServing(agent)
        XCTAssertTrue(agent.output.contains("was replaced: starting the new one"), agent.output)
        XCTAssertTrue(agent.process.isRunning)
    }

    private func waitForNoWindow() -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while !display.windows(titled: title).isEmpty {
            guard Date() < deadline else { return false }
            usleep(50_000)
        }
        return true
    }
}
