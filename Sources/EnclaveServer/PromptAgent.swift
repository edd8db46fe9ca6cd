import EnclaveCore
import EnclaveProtocol
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One serving prompt agent: its connection's reply sink and the prompts it shows now. The daemon
/// sends each screen as an `agentEvent` reply to the agent's `servePrompts`; the agent's
/// `promptAction`s come back through `answer`, checked against the screen it was shown
/// (`PromptKeyboard.action(for:on:)`), and go straight into the evaluation — the app that asked
/// never sees them.
final class PromptAgent: Sendable {
    typealias OnAction = @Sendable (PromptKeyboard.Action) -> Void
    typealias OnLost = @Sendable () -> Void

    private struct Open {
        var screen: PromptScreen?
        var shown = false
        var onAction: OnAction
        var onLost: OnLost
        var deadline: Deadline?
    }

    let connection: UInt64
    let seat: PromptSeat
    private let sink: any ReplySink
    private let requestID: UInt64
    let answerTimeout: Double
    /// Called once when the agent stops answering: the daemon stops sending it prompts.
    private let onUnresponsive: @Sendable (PromptAgent) -> Void
    private struct Prompts {
        var open: [UInt64: Open] = [:]
        var next: UInt64 = 1
        var ended = false
    }
    private let prompts = Mutex(Prompts())

    init(
        connection: UInt64,
        seat: PromptSeat,
        requestID: UInt64,
        sink: any ReplySink,
        answerTimeout: Double,
        onUnresponsive: @escaping @Sendable (PromptAgent) -> Void
    ) {
        self.connection = connection
        self.seat = seat
        self.requestID = requestID
        self.sink = sink
        self.answerTimeout = answerTimeout
        self.onUnresponsive = onUnresponsive
    }

    /// Tells the agent it serves its seat now.
    func announce() {
        sink.send(
            ReplyEnvelope(id: requestID, reply: .agentEvent(AgentEvent(prompt: 0, serving: seat.description)))
        )
    }

    /// A new prompt on this agent; nil once the agent is gone.
    func open(onAction: @escaping OnAction, onLost: @escaping OnLost) -> AgentPrompt? {
        prompts.withLock { prompts in
            guard !prompts.ended else { return nil }
            defer { prompts.next += 1 }
            prompts.open[prompts.next] = Open(onAction: onAction, onLost: onLost)
            return AgentPrompt(agent: self, number: prompts.next)
        }
    }

    /// The agent's answer to prompt `number`: false when no such prompt is open or its screen
    /// does not offer the answer.
    func answer(_ number: UInt64, _ action: PromptAction) -> Bool {
        let deliver = prompts.withLock { prompts -> (OnAction, PromptKeyboard.Action)?? in
            guard var open = prompts.open[number], open.screen != nil else { return .none }
            if action.kind == .shown {
                open.shown = true
                open.deadline?.cancel()
                open.deadline = nil
                prompts.open[number] = open
                return .some(nil)
            }
            guard let meant = PromptKeyboard.action(for: action, on: open.screen) else { return .none }
            return .some((open.onAction, meant))
        }
        switch deliver {
        case .none: return false
        case .some(nil): return true
        case .some(let (onAction, meant)?):
            onAction(meant)
            return true
        }
    }

    /// The agent's connection closed, or it stopped answering: every prompt it shows moves on.
    func end() {
        let lost = prompts.withLock { prompts -> [Open] in
            guard !prompts.ended else { return [] }
            prompts.ended = true
            defer { prompts.open.removeAll() }
            return Array(prompts.open.values)
        }
        for open in lost {
            open.deadline?.cancel()
            open.onLost()
        }
    }

    fileprivate func show(_ number: UInt64, _ screen: PromptScreen) {
        let send = prompts.withLock { prompts -> Bool in
            guard !prompts.ended, var open = prompts.open[number] else { return false }
            let first = open.screen == nil
            open.screen = screen
            if first {
                // The window must be up within the timeout, or the agent is dropped.
                let timeout = answerTimeout
                open.deadline = Deadline(after: timeout) { [weak self] in
                    self?.timedOut(number)
                }
            }
            prompts.open[number] = open
            return true
        }
        if send { sink.send(ReplyEnvelope(id: requestID, reply: .agentEvent(.show(number, screen)))) }
    }

    fileprivate func close(_ number: UInt64, result: String) {
        let open = prompts.withLock { $0.open.removeValue(forKey: number) }
        guard let open else { return }
        open.deadline?.cancel()
        if open.screen != nil {
            sink.send(ReplyEnvelope(id: requestID, reply: .agentEvent(.close(number, result: result))))
        }
    }

    private func timedOut(_ number: UInt64) {
        let unanswered = prompts.withLock { $0.open[number].map { !$0.shown } ?? false }
        guard unanswered else { return }
        onUnresponsive(self)
        end()
    }

    /// Ends the agent's `servePrompts` with `failure` (it stopped answering).
    func dismiss(_ failure: Failure) {
        sink.send(ReplyEnvelope(id: requestID, reply: .failure(failure)))
    }
}

/// One prompt drawn by the agent.
final class AgentPrompt: PromptPresenter {
    private let agent: PromptAgent
    let number: UInt64

    fileprivate init(agent: PromptAgent, number: UInt64) {
        self.agent = agent
        self.number = number
    }

    func show(_ screen: PromptScreen) { agent.show(number, screen) }
    func close(result: String) async { agent.close(number, result: result) }
}

/// The serving agents of the daemon, by seat.
final class PromptAgentRegistry: Sendable {
    private let agents = Mutex(PromptAgents<PromptAgent>())

    func register(_ agent: PromptAgent) -> PromptAgents<PromptAgent>.Registration {
        agents.withLock { $0.register(agent, connection: agent.connection, seat: agent.seat) }
    }

    func remove(connection: UInt64) { agents.withLock { $0.remove(connection: connection) } }

    /// The agent that draws the prompts of `peer`'s seat, if one serves it.
    func agent(serving peer: PeerIdentity) -> PromptAgent? {
        guard peer.identity.kind != .administrator else { return nil }
        return agent(for: peer.seat)
    }

    /// The agent that draws the prompts of `seat` (a user in a session), if one serves it.
    func agent(for seat: PromptSeat) -> PromptAgent? { agents.withLock { $0.agent(for: seat) } }
}
