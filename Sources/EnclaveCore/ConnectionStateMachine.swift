import EnclaveProtocol

/// The rules of one connection to the daemon, as a value: the hello gate, the one request at a
/// time that waits for the person, the prompt agent's role, closing, and the connection's
/// `LAContext`s (`ContextTable`). One method per event, each returning what the shell must do;
/// the shell (`ConnectionHandler`) holds it under one lock and only performs.
///
/// `Running` is what the shell keeps for work running on a context, `Agent` the prompt agent this
/// connection serves as, `Waiter` what must run when the connection closes.
public struct ConnectionStateMachine<Running, Agent, Waiter> {
    public enum Phase: Equatable, Sendable {
        /// Nothing but `hello` is answered yet.
        case awaitingHello
        case greeted
        /// The connection ended; nothing new starts on it.
        case closed
    }

    /// Whether this connection serves the prompts of its session.
    private enum AgentRole {
        case none
        /// Taken, while the shell registers it with the daemon's agents.
        case registering(Agent)
        case serving(Agent)
    }

    public private(set) var phase: Phase = .awaitingHello
    /// The coding after the first hello's answer: that hello's choice. A later hello changes
    /// nothing: replies of running requests may be on their way.
    public private(set) var encoding = WireEncoding.json
    /// Whether the client was once seen sending a request behind one it waits for the answer to
    /// (several threads on one connection). Its reads then run as tasks of their own, started in
    /// the order they came, so that the next is read meanwhile; until then a read that needs
    /// nobody is answered where it arrives.
    public private(set) var pipelines = false
    /// Root on a user-mode daemon run by another user: it may only lift the passcode counter.
    private let administrator: Bool
    /// Whether a request of this connection waits for the person now.
    private var waitingForThePerson = false
    private var agentRole = AgentRole.none
    private var closeWaiters: [Waiter] = []
    private var contexts = ContextTable<Running>()

    public init(administrator: Bool = false) {
        self.administrator = administrator
    }

    // MARK: Requests

    public enum RequestAction: Equatable, Sendable {
        /// Say hello back, naming the coding of every message after the answer: requests are
        /// answered from now on.
        case greet(WireEncoding)
        /// Answer this failure, then close the connection.
        case refuseAndClose(Failure)
        /// Answer this failure; the connection goes on.
        case refuse(Failure)
        /// Answer it before the next frame is read (what needs no person, or starts work of its own).
        case answer
        /// Run it on its own, holding the connection's person slot until `personRequestFinished()`:
        /// the connection keeps reading, so its close is seen at once and ends the prompt.
        case answerWaitingForThePerson
        /// The connection closed meanwhile: nothing is answered.
        case drop
    }

    /// A request, decoded, in the order it arrived. `followed`: more of the client's bytes were
    /// read with it (it sent more without waiting). A context's `invalidate`, whose answer nobody
    /// waits for, is sent just before the next request by a client that waits for every other
    /// answer: it does not count.
    public mutating func requestArrived(_ request: Request, followed: Bool = false) -> RequestAction {
        if followed, request.operation != .invalidate { pipelines = true }
        switch phase {
        case .closed:
            return .drop
        case .awaitingHello, .greeted:
            if case .hello(let hello) = request {
                guard hello.version == enclaveProtocolVersion else {
                    return .refuseAndClose(
                        Failure(
                            .unsupportedVersion,
                            "this daemon speaks protocol version \(enclaveProtocolVersion), not \(hello.version)"
                        )
                    )
                }
                if phase == .awaitingHello { encoding = hello.chosenEncoding }
                phase = .greeted
                return .greet(encoding)
            }
            guard phase == .greeted else {
                return .refuse(Failure(.outOfOrder, "the first request on a connection must be hello"))
            }
            if administrator && !AdminPolicy.administratorMay(request.operation) {
                return .refuse(AdminPolicy.administratorRefusal)
            }
            guard AdminPolicy.purpose(of: request) != nil else { return .answer }
            // One at a time per connection: each holds a prompt or a reader thread while it waits.
            guard !waitingForThePerson else {
                return .refuse(Failure(.busy, "this connection is already waiting for the person"))
            }
            waitingForThePerson = true
            return .answerWaitingForThePerson
        }
    }

    /// The request that waited for the person has its answer (freed before the answer leaves: the
    /// client may send its next such request at once).
    public mutating func personRequestFinished() {
        waitingForThePerson = false
    }

    /// The hello deadline passed: whether to close the connection.
    public func helloDeadlinePassed() -> Bool {
        phase == .awaitingHello
    }

    // MARK: Contexts

    /// Whether a request may use the context (creating it): false once it was invalidated.
    public mutating func useContext(_ context: String) throws(Failure) -> Bool {
        try contexts.use(context)
    }

    /// An evaluation asks for the context's prompt input; on a closed connection, or past the
    /// connection's live contexts, it finds the context invalid.
    public mutating func evaluationStarting(
        on context: String,
        _ evaluation: Running
    ) -> ContextTable<Running>.Admission {
        guard phase != .closed else { return .invalidated }
        do { return try contexts.admit(context, evaluation: evaluation) } catch { return .invalidated }
    }

    /// The evaluation ended; what it proved joins the context's authorization.
    public mutating func evaluationFinished(
        on context: String,
        proven: ContextAuthorization?,
        now: MonotonicStamp,
        lifetime: Double
    ) {
        contexts.finish(context, proven: proven, now: now, lifetime: lifetime)
    }

    public enum Tracking: Equatable, Sendable {
        /// It runs, tracked: invalidating its context or closing the connection ends it.
        case tracked(ticket: UInt64)
        /// Its context was invalidated: it runs untracked (one that needs no authentication
        /// answers as usual; an evaluation finds the context invalid).
        case untracked
        /// The connection closed: it does not run.
        case closed
    }

    /// A request starts running on the context.
    public mutating func requestStarting(on context: String, _ running: Running) throws(Failure) -> Tracking {
        guard phase != .closed else { return .closed }
        guard let ticket = try contexts.track(context, running) else { return .untracked }
        return .tracked(ticket: ticket)
    }

    public mutating func requestEnded(on context: String, ticket: UInt64) {
        contexts.untrack(context, ticket: ticket)
    }

    /// `invalidate`: what ran on the context, for the shell to end.
    public mutating func invalidate(_ context: String) -> [Running] {
        contexts.invalidate(context)
    }

    public var runningCount: Int { contexts.running }

    // MARK: The prompt agent

    public enum AgentAdmission: Equatable, Sendable {
        /// Register it with the daemon's agents, then say `agentRegistered()`.
        case register
        case alreadyServing
        case closed
    }

    /// `servePrompts`: this connection would serve as `agent` (the kernel already said it is the
    /// installed agent).
    public mutating func agentStarting(_ agent: Agent) -> AgentAdmission {
        guard phase != .closed else { return .closed }
        guard case .none = agentRole else { return .alreadyServing }
        agentRole = .registering(agent)
        return .register
    }

    /// The daemon registered the agent: whether it serves, or the connection closed meanwhile (the
    /// shell removes it again).
    public mutating func agentRegistered() -> Bool {
        guard phase != .closed, case .registering(let agent) = agentRole else {
            agentRole = .none
            return false
        }
        agentRole = .serving(agent)
        return true
    }

    /// The daemon refused the agent (another serves the seat).
    public mutating func agentRefused() {
        agentRole = .none
    }

    /// The agent this connection serves as, to take its prompt answers.
    public var servingAgent: Agent? {
        if case .serving(let agent) = agentRole { return agent }
        return nil
    }

    // MARK: Closing

    /// Registers what runs when the connection closes; false when it closed already (the shell
    /// runs it at once).
    public mutating func whenClosed(_ waiter: Waiter) -> Bool {
        guard phase != .closed else { return false }
        closeWaiters.append(waiter)
        return true
    }

    public struct ClosedAction {
        /// Everything running on its contexts, to end.
        public var ending: [Running]
        /// The agent it served as, to remove and end.
        public var agent: Agent?
        public var waiters: [Waiter]
    }

    /// The connection ended (once; later calls return nothing to do).
    public mutating func closed() -> ClosedAction {
        guard phase != .closed else { return ClosedAction(ending: [], agent: nil, waiters: []) }
        phase = .closed
        let agent = servingAgent
        if case .serving = agentRole { agentRole = .none }
        defer { closeWaiters = [] }
        return ClosedAction(ending: contexts.close(), agent: agent, waiters: closeWaiters)
    }
}
