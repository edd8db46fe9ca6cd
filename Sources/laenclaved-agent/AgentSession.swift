import CPromptWindow
import EnclaveClient
import EnclaveProtocol
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The agent's connection to the daemon, on a thread of its own: `servePrompts`, then each
/// `agentEvent` drawn on GTK's main thread, each of the person's answers sent back as a
/// `promptAction`. When the daemon goes away (a restart, an upgrade) the windows close and the
/// agent offers itself again.
final class AgentSession: Sendable {
    private struct State {
        var connection: EnclaveConnection?
        /// The last screen of each open prompt, to draw again when an answer does not go through.
        var screens: [UInt64: PromptScreen] = [:]
        /// Seconds before offering itself again: 2, doubling to 30 while the daemon cannot be
        /// reached or refuses; 2 again once it served.
        var retryDelay: UInt32 = 2
    }

    private let endpoint: EnclaveEndpoint
    private let state = Mutex(State())
    /// The exit status when the daemon does not admit this program (EX_CONFIG; the user unit does
    /// not restart on it).
    static let notAdmitted: Int32 = 78

    init(endpoint: EnclaveEndpoint) { self.endpoint = endpoint }

    /// Serves until the process ends. A refusal that cannot change (this executable is not the
    /// agent the daemon admits) ends the process.
    func serve() {
        var lastProblem = ""
        while true {
            let problem = serveOnce()
            state.withLock { $0.screens.removeAll() }
            onMain { la_prompt_close_all() }
            if problem != lastProblem { say(problem) }
            lastProblem = problem
            sleep(
                state.withLock { s -> UInt32 in
                    defer { s.retryDelay = min(s.retryDelay * 2, 30) }
                    return s.retryDelay
                }
            )
        }
    }

    /// One connection's life: what ended it.
    private func serveOnce() -> String {
        let c: EnclaveConnection
        do { c = try EnclaveConnections.shared(for: endpoint) } catch { return "\(error)" }
        state.withLock { $0.connection = c }
        defer { state.withLock { $0.connection = nil } }
        let done = DispatchSemaphore(value: 0)
        let ending = HandedResult<Result<Reply, EnclaveClientError>>()
        c.send(
            .servePrompts,
            onEvent: { [self] reply in
                if case .agentEvent(let event) = reply { receive(event) }
            },
            completion: { result in
                ending.set(result)
                done.signal()
            }
        )
        done.wait()
        switch ending.current {
        case .success(.failure(let f))? where f.code == .notPermitted:
            say("\(f.message)")
            Self.restartIfReplaced()
            exit(Self.notAdmitted)
        case .success(.failure(let f))?:
            c.close()
            return f.message
        case .success(let other)?:
            c.close()
            return "the daemon ended serving: \(other)"
        case .failure(let e)?:
            return "\(e)"
        case nil:
            return "the connection ended"
        }
    }

    private func receive(_ event: AgentEvent) {
        if let seat = event.serving {
            say("drawing the prompts of \(seat)")
            state.withLock { $0.retryDelay = 2 }
        }
        let prompt = event.prompt
        if let screen = event.screen {
            state.withLock { $0.screens[prompt] = screen }
            onMain { [self] in
                WindowScreen(screen).withCStruct { la_prompt_show(prompt, $0) }
                // The window is up: the daemon waits for this before it counts on us.
                send(.promptAction(.init(prompt: prompt, action: PromptAction(.shown))))
            }
        }
        if event.closed != nil {
            state.withLock { $0.screens[prompt] = nil }
            onMain { la_prompt_close(prompt) }
        }
    }

    /// Draws the prompt's last screen again (after "Checking…", when the answer did not go through).
    private func redraw(_ prompt: UInt64) {
        guard let screen = state.withLock({ $0.screens[prompt] }) else { return }
        onMain { WindowScreen(screen).withCStruct { la_prompt_show(prompt, $0) } }
    }

    /// After an upgrade the running program is the old, deleted file, which the daemon no longer
    /// admits: the installed one takes over, in this process.
    static func restartIfReplaced() {
        guard let running = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"),
            running.hasSuffix(" (deleted)")
        else { return }
        let installed = String(running.dropLast(" (deleted)".count))
        guard FileManager.default.isExecutableFile(atPath: installed) else { return }
        say("\(installed) was replaced: starting the new one")
        let arguments = [installed] + CommandLine.arguments.dropFirst()
        var argv = arguments.map { strdup($0) } + [nil]
        execv(installed, &argv)
        say("could not start \(installed): \(String(cString: strerror(errno)))")
    }

    /// An answer from a window (GTK's main thread).
    func answer(_ prompt: UInt64, _ action: Int32, _ passcode: UnsafePointer<CChar>?) {
        let answer: PromptAction
        switch Int(action) {
        case LA_PROMPT_PASSCODE:
            guard let passcode else { return }
            let typed = String(cString: passcode)
            // Never a passcode the daemon cannot take: the window goes back to its screen.
            guard typed.utf8.count <= WireLimits.maxPasscodeBytes else { return redraw(prompt) }
            answer = .typed(typed)
        case LA_PROMPT_CANCEL: answer = PromptAction(.cancel)
        case LA_PROMPT_FALLBACK: answer = PromptAction(.fallback)
        case LA_PROMPT_RETRY: answer = PromptAction(.retry)
        case LA_PROMPT_SIMULATED_MATCH: answer = PromptAction(.simulatedMatch)
        case LA_PROMPT_SIMULATED_NO_MATCH: answer = PromptAction(.simulatedNoMatch)
        default: return
        }
        send(.promptAction(.init(prompt: prompt, action: answer)))
    }

    private func send(_ request: Request) {
        guard let c = state.withLock({ $0.connection }) else { return }
        c.send(request) { [self] result in
            guard case .success(.failure(let f)) = result else { return }
            say("the daemon refused an answer: \(f.message)")
            if case .promptAction(let answer) = request { redraw(answer.prompt) }
        }
    }
}

/// The completion of `servePrompts`, handed from the reader thread.

/// Runs `body` on GTK's main thread.
func onMain(_ body: @escaping () -> Void) {
    let box = Unmanaged.passRetained(MainCall(body)).toOpaque()
    la_prompt_call_on_main(
        { data in
            Unmanaged<MainCall>.fromOpaque(data!).takeRetainedValue().body()
        },
        box
    )
}

private final class MainCall {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

/// A screen as C strings for `la_prompt_show`, alive for the call.
struct WindowScreen {
    let screen: PromptScreen
    init(_ screen: PromptScreen) { self.screen = screen }

    func withCStruct(_ body: (UnsafePointer<la_prompt_screen>) -> Void) {
        let s = screen
        let strings = [
            s.app, s.reason, s.instruction, s.cancelTitle, s.fallbackTitle, s.warning, s.sensorName, s.heading,
        ].map { $0.map { strdup($0) } }
        defer { for string in strings { free(string ?? nil) } }
        var c = la_prompt_screen(
            app: strings[0]!,
            heading: strings[7]!,
            administration: s.administration == true ? 1 : 0,
            reason: strings[1]!,
            instruction: strings[2]!,
            cancel_title: strings[3]!,
            fallback_title: strings[4] ?? nil,
            warning: strings[5] ?? nil,
            sensor_name: strings[6] ?? nil,
            passcode_entry: s.passcodeEntry ? 1 : 0,
            retry_offered: s.retryOffered ? 1 : 0,
            simulated_touches: s.sensorSimulated && s.sensorArmed ? 1 : 0
        )
        body(&c)
    }
}

/// One line to standard error (the journal, under the user unit).
func say(_ line: String) {
    FileHandle.standardError.write(Data(("laenclaved-agent: " + line + "\n").utf8))
}
