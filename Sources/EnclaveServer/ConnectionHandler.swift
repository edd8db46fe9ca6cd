import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import Synchronization

/// Turns each request of one connection into work on the user's session. Identity comes from the
/// peer credentials taken when the connection was accepted. The connection's rules are its
/// `ConnectionStateMachine`, held under one lock; this shell performs what it says.
final class ConnectionHandler: Sendable {
    typealias Machine = ConnectionStateMachine<RunningRequest, PromptAgent, @Sendable () -> Void>

    let peer: PeerIdentity
    let daemon: EnclaveDaemon
    let sink: any ReplySink
    let state: Mutex<Machine>
    /// What the client handed over (`handoff`): the terminal its prompts are drawn on, the pipe
    /// its administration's secrets are read from.
    let handed = HandedDescriptors()
    /// This connection among the daemon's, for its handoff tickets.
    let number = ConnectionHandler.lastNumber.wrappingAdd(1, ordering: .relaxed).newValue
    private static let lastNumber = Atomic<UInt64>(0)
    let logger: Logger

    /// Requests that run on their own (evaluations, keychain and key calls), for `run()`.
    private let jobs: AsyncStream<@Sendable () async -> Void>
    let jobQueue: AsyncStream<@Sendable () async -> Void>.Continuation

    /// The connection's event loop as a task executor (`SocketServer`; nil in-process): where its
    /// evaluations run their sensor captures, so a reading reaches the evaluation on the thread
    /// it runs on.
    let executor: (any TaskExecutor)?

    init(
        peer: PeerIdentity,
        daemon: EnclaveDaemon,
        sink: any ReplySink,
        logger: Logger,
        executor: (any TaskExecutor)? = nil
    ) {
        self.peer = peer
        self.daemon = daemon
        self.sink = sink
        self.logger = logger
        self.executor = executor
        state = Mutex(Machine(administrator: peer.identity.kind == .administrator))
        (jobs, jobQueue) = AsyncStream.makeStream()
    }

    /// Whether the hello deadline closes the connection (nothing but hello was said in time).
    func helloDeadlinePassed() -> Bool { state.withLock { $0.helloDeadlinePassed() } }

    /// Runs the connection's requests as child tasks of one task group, until `closed()`, then
    /// waits for every one of them: nothing a connection started outlives it. Run it beside the
    /// loop that feeds `receive`.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await job in jobs { group.addTask { await job() } }
        }
    }

    /// Called for each complete frame, in order. Returns false when the connection must close.
    /// `followed`: more of the client's bytes were read with it (it sent more without waiting).
    func receive(_ payload: [UInt8], followed: Bool = false) async -> Bool {
        let envelope: RequestEnvelope
        // The coding the first hello chose (`ConnectionStateMachine.encoding`): JSON until then.
        let encoding = state.withLock { $0.encoding }
        do throws(WireError) { envelope = try RequestEnvelope.decode(payload, encoding) } catch {
            await sink.send(ReplyEnvelope(id: error.id ?? 0, reply: .failure(error.failure)))
            return true
        }
        let id = envelope.id
        let request = envelope.request
        switch state.withLock({ $0.requestArrived(request, followed: followed) }) {
        case .greet(let chosen):
            await sink.send(
                ReplyEnvelope(
                    id: id,
                    reply: .hello(
                        HelloReply(
                            version: enclaveProtocolVersion,
                            mode: daemon.config.mode,
                            uid: peer.uid,
                            app: peer.app,
                            encoding: chosen == .json ? nil : chosen.rawValue
                        )
                    )
                )
            )
            // The first hello's answer went in JSON; the replies that follow in the coding it named
            // (a later hello names the same one: nothing changes).
            sink.speak(chosen)
        case .refuseAndClose(let failure):
            await sink.send(ReplyEnvelope(id: id, reply: .failure(failure)))
            return false
        case .refuse(let failure):
            await sink.send(ReplyEnvelope(id: id, reply: .failure(failure)))
        case .drop:
            return false
        case .answer:
            if let reply = await answer(envelope) { await sink.send(ReplyEnvelope(id: id, reply: reply)) }
        case .answerWaitingForThePerson:
            jobQueue.yield { [self] in
                let reply = await answer(envelope)
                state.withLock { $0.personRequestFinished() }
                if let reply { await sink.send(ReplyEnvelope(id: id, reply: reply)) }
            }
        }
        return true
    }

    private func answer(_ envelope: RequestEnvelope) async -> Reply? {
        do {
            return try await handle(envelope)
        } catch {
            if let failure = DaemonError.failure(for: error) { return .failure(failure) }
            logger.error("request failed", metadata: ["op": "\(envelope.request.operation)", "error": "\(error)"])
            return .failure(Failure(.internalError, "the daemon could not complete \(envelope.request.operation)"))
        }
    }

    /// The connection ended: every request on it ends, and `run()` returns once they have. When the
    /// daemon itself is stopping, the evaluations answer systemCancel (the client is still there
    /// to read it); otherwise the client went away and they end with appCancel.
    func closed() {
        let input = daemon.stopping.endingInput
        let closing = state.withLock { $0.closed() }
        for ending in closing.ending { ending.end(input) }
        if let agent = closing.agent { leave(agent) }
        daemon.handoff.revoke(connection: number)
        for waiter in closing.waiters { waiter() }
        handed.close()
        jobQueue.finish()
    }

    /// Runs `body` when the connection closes (at once if it has).
    func whenClosed(_ body: @escaping @Sendable () -> Void) {
        if !state.withLock({ $0.whenClosed(body) }) { body() }
    }

    private func handle(_ envelope: RequestEnvelope) async throws -> Reply? {
        try envelope.request.validate()
        // The machine let root through only for what it may do on the user's daemon.
        let session = try daemon.session(for: peer.identity.kind == .administrator ? daemon.servedUser : peer.uid)
        let id = envelope.id
        switch envelope.request {
        case .hello:
            return nil
        case .canEvaluate(let a):
            let policy = try ArgumentChecks.policy(a.policy)
            if !(try state.withLock { try $0.useContext(a.context) }) {
                return .canEvaluate(
                    CanEvaluateReply(
                        biometryType: daemon.sensor?.info.kind ?? .none,
                        error: .invalidContext,
                        message: "Invalid context.",
                        domainState: nil
                    )
                )
            }
            return .canEvaluate(try await session.canEvaluate(policy: policy, app: peer.app))
        case .evaluate(let a):
            try startEvaluation(id: id, a, session: session)
            return nil
        case .authorizeAccessControl(let a):
            try startAccessControl(id: id, a, session: session)
            return nil
        case .handoff(let a):
            let owner = HandoffTickets<HandedDescriptors>.Owner(uid: peer.uid, pid: peer.pid)
            return .handoffTicket(
                daemon.handoff.issue(to: owner, connection: number, kind: a.kind, destination: handed)
            )
        case .invalidate(let a):
            for running in state.withLock({ $0.invalidate(a.context) }) { running.end() }
            return .ok
        case .domainState:
            return .domainState(
                DomainStateReply(
                    biometryType: daemon.sensor?.info.kind ?? .none,
                    stateHash: try await session.domainState(app: peer.app)
                )
            )
        case .status:
            var status = try await session.status(app: peer.app)
            status.promptAgent = daemon.promptAgents.agent(serving: peer) != nil
            status.root = daemon.root
            return .status(status)
        case .simulate(let a):
            try await session.simulate(a.events)
            return .ok
        case .clearSimulated:
            await session.clearSimulated()
            return .ok
        case .keychainAdd(let k):
            try startKeychain(id: id, .add, k, session: session)
            return nil
        case .keychainCopy(let k):
            if state.withLock({ $0.pipelines }) {
                try startKeychain(id: id, .copy, k, session: session)
                return nil
            }
            return try await copyKeychain(id: id, k, session: session)
        case .keychainUpdate(let k):
            try startKeychain(id: id, .update, k, session: session)
            return nil
        case .keychainDelete(let k):
            try startKeychain(id: id, .delete, k, session: session)
            return nil
        case .key(let k):
            try startKeyOperation(id: id, k, session: session)
            return nil
        case .servePrompts:
            return try await servePrompts(requestID: id)
        case .promptAction(let a):
            return try answerPrompt(a.prompt, a.action)
        case .pamAuthenticate(let a):
            try startPAMAuthentication(id: id, a)
            return nil
        case .setPasscode, .changePasscode, .removePasscode, .enroll, .unenroll, .audit, .resetPasscodeLockout,
            .remoteLock,
            .configureAccessGroup, .accessGroups, .enrolments, .keychainList, .keychainRemove:
            return try await administer(envelope, session: session)
        }
    }

    func auditEntry(_ operation: String, policy: Int? = nil, result: String) -> AuditEntry {
        AuditEntry(
            time: Date(),
            uid: peer.uid,
            pid: peer.pid,
            app: peer.app,
            operation: operation,
            policy: policy,
            result: result
        )
    }

    /// Records an entry with the next group commit (see `AuditLog`).
    func audit(_ operation: String, policy: Int? = nil, result: String) {
        daemon.auditLog.append(auditEntry(operation, policy: policy, result: result))
    }
}
