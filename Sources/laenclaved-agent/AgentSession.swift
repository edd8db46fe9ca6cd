import CPromptWindow
import EnclaveClient
import EnclaveProtocol
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The agent's connection to the daemon, on a thread of its own: `servePrompts`, then each
/// `agentEvent` drawn on GTK's main thread, each of the person's answers sent back as a
/// `promptAction`. When the daemon goes away (a restart, an upgrade) the windows close and the
/// agent offers itself again.
final class AgentSession: @unchecked Sendable {
    private let endpoint: EnclaveEndpoint
    private let lock = NSLock()
    private var connection: EnclaveConnection?
    private static let retryDelay: UInt32 = 2
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
            onMain { la_prompt_close_all() }
            if problem != lastProblem { say("\(problem)") }
            lastProblem = problem
            sleep(Self.retryDelay)
        }
    }

    /// One connection's life: what ended it.
    private func serveOnce() -> String {
        let c: EnclaveConnection
        do { c = try EnclaveConnections.shared(for: endpoint) } catch { return "\(error)" }
        lock.withLock { connection = c }
        defer { lock.withLock { connection = nil } }
        let done = DispatchSemaphore(value: 0)
        let ending = ResultBox()
        c.send(.servePrompts, onEvent: { [self] reply in
            if case .agentEvent(let event) = reply { receive(event) }
        }, completion: { result in
            ending.set(result)
            done.signal()
        })
        done.wait()
        switch ending.get() {
        case .success(.failure(let f))? where f.code == .notPermitted:
            say("\(f.message)")
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
        if let seat = event.serving { say("drawing the prompts of \(seat)") }
        let prompt = event.prompt
        if let screen = event.screen {
            onMain { [self] in
                WindowScreen(screen).withCStruct { la_prompt_show(prompt, $0) }
                // The window is up: the daemon waits for this before it counts on us.
                send(.promptAction(prompt: prompt, action: PromptAction(.shown)))
            }
        }
        if event.closed != nil { onMain { la_prompt_close(prompt) } }
    }

    /// An answer from a window (GTK's main thread).
    func answer(_ prompt: UInt64, _ action: Int32, _ passcode: UnsafePointer<CChar>?) {
        let answer: PromptAction
        switch Int(action) {
        case LA_PROMPT_PASSCODE:
            guard let passcode else { return }
            answer = .typed(String(cString: passcode))
        case LA_PROMPT_CANCEL: answer = PromptAction(.cancel)
        case LA_PROMPT_FALLBACK: answer = PromptAction(.fallback)
        case LA_PROMPT_RETRY: answer = PromptAction(.retry)
        case LA_PROMPT_SIMULATED_MATCH: answer = PromptAction(.simulatedMatch)
        case LA_PROMPT_SIMULATED_NO_MATCH: answer = PromptAction(.simulatedNoMatch)
        default: return
        }
        send(.promptAction(prompt: prompt, action: answer))
    }

    private func send(_ request: Request) {
        guard let c = lock.withLock({ connection }) else { return }
        c.send(request) { result in
            if case .success(.failure(let f)) = result { say("the daemon refused an answer: \(f.message)") }
        }
    }
}

/// The completion of `servePrompts`, handed from the reader thread.
private final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Result<Reply, EnclaveClientError>?
    func set(_ v: Result<Reply, EnclaveClientError>) { lock.withLock { value = v } }
    func get() -> Result<Reply, EnclaveClientError>? { lock.withLock { value } }
}

/// Runs `body` on GTK's main thread.
func onMain(_ body: @escaping () -> Void) {
    let box = Unmanaged.passRetained(MainCall(body)).toOpaque()
    la_prompt_call_on_main({ data in
        Unmanaged<MainCall>.fromOpaque(data!).takeRetainedValue().body()
    }, box)
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
        let strings = [s.app, s.reason, s.instruction, s.cancelTitle, s.fallbackTitle, s.warning, s.sensorName].map { $0.map { strdup($0) } }
        defer { strings.forEach { free($0 ?? nil) } }
        var c = la_prompt_screen(app: strings[0]!, reason: strings[1]!, instruction: strings[2]!, cancel_title: strings[3]!,
                                 fallback_title: strings[4] ?? nil, warning: strings[5] ?? nil, sensor_name: strings[6] ?? nil,
                                 passcode_entry: s.passcodeEntry ? 1 : 0, retry_offered: s.retryOffered ? 1 : 0,
                                 simulated_touches: s.sensorSimulated && s.sensorArmed ? 1 : 0)
        body(&c)
    }
}

/// One line to standard error (the journal, under the user unit).
func say(_ line: String) {
    FileHandle.standardError.write(Data(("laenclaved-agent: " + line + "\n").utf8))
}
