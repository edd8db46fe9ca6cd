import EnclaveCore
import EnclaveProtocol

/// The connection as the prompt agent of its seat: it draws the daemon's prompts and answers them.
extension ConnectionHandler {
    /// `servePrompts`: this connection becomes the prompt agent of its seat, if the kernel says it
    /// is the installed agent and no other agent serves the seat. No final reply while it serves.
    func servePrompts(requestID: UInt64) async throws -> Reply? {
        let path = daemon.config.promptAgentPath
        guard PromptAgents<PromptAgent>.admits(peer.identity, agentPath: path) else {
            logger.warning("refused a prompt agent", metadata: ["app": "\(peer.app)", "uid": "\(peer.uid)"])
            throw Failure(
                .notPermitted,
                "only the prompt agent (\(path ?? "none is configured")) may draw prompts; this is \(peer.app)"
            )
        }
        let registry = daemon.promptAgents
        let logger = self.logger
        let agent = PromptAgent(
            connection: number,
            seat: peer.seat,
            requestID: requestID,
            sink: sink,
            answerTimeout: daemon.config.promptAgentAnswerTimeout,
            onUnresponsive: { agent in
                registry.remove(connection: agent.connection)
                logger.warning("the prompt agent did not answer: dropped", metadata: ["seat": "\(agent.seat)"])
                agent.dismiss(
                    Failure(
                        .busy,
                        "the agent did not show a prompt within \(Int(agent.answerTimeout)) s: it no longer serves"
                    )
                )
            }
        )
        switch state.withLock({ $0.agentStarting(agent) }) {
        case .closed:
            return nil
        case .alreadyServing:
            throw Failure(.busy, "this connection already serves the prompts of its session")
        case .register:
            break
        }
        if case .refused(let why) = registry.register(agent) {
            state.withLock { $0.agentRefused() }
            throw Failure(.busy, why)
        }
        guard state.withLock({ $0.agentRegistered() }) else {
            // The connection closed while the agent was being registered.
            leave(agent)
            return nil
        }
        logger.info("prompt agent serves", metadata: ["seat": "\(agent.seat)", "pid": "\(peer.pid)"])
        agent.announce()
        return nil
    }

    /// `promptAction`: the person's answer on the prompt this agent shows.
    func answerPrompt(_ prompt: UInt64, _ action: PromptAction) throws -> Reply {
        guard let agent = state.withLock({ $0.servingAgent }) else {
            throw Failure(.notPermitted, "only the prompt agent serving this session answers prompts")
        }
        guard agent.answer(prompt, action) else {
            throw Failure(
                .invalidParameter,
                "prompt \(prompt) is not open on this agent, or its screen offers no \(action.kind.rawValue)"
            )
        }
        return .ok
    }

    /// The agent's connection closed: it serves no longer.
    func leave(_ agent: PromptAgent) {
        daemon.promptAgents.remove(connection: agent.connection)
        agent.end()
        logger.info("prompt agent left", metadata: ["seat": "\(agent.seat)"])
    }
}
