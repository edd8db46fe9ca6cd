import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging

/// Sends replies on one connection; several evaluations may answer at once.
protocol ReplySink: Sendable {
    func send(_ envelope: ReplyEnvelope) async
}

/// What runs on a context: the evaluation's input channel and the request's stop signal.
struct RunningRequest: Sendable {
    var inputs: AsyncStream<SessionInput>.Continuation?
    var stop: AsyncStream<Never>.Continuation?

    /// Ends it: an evaluation reads `input` (appCancel when its client went or invalidated the
    /// context, systemCancel when the daemon stops); a request waiting for the user's prompt, or
    /// for anything else, is cancelled.
    func end(_ input: EvaluationMachine.Input = .appCancel) {
        inputs?.yield(.machine(input))
        stop?.finish()
    }
}

/// A flag taken by one holder at a time.
final class OneAtATime: @unchecked Sendable {
    private let lock = NSLock()
    private var taken = false
    func begin() -> Bool { lock.withLock { defer { taken = true }; return !taken } }
    func end() { lock.withLock { taken = false } }
}

/// Fires once, when a connection closes, for whatever registered before or registers after.
final class ClosingSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var fired = false
    private var waiting: [@Sendable () -> Void] = []

    func fire() {
        let run = lock.withLock { () -> [@Sendable () -> Void] in
            fired = true
            defer { waiting = [] }
            return waiting
        }
        run.forEach { $0() }
    }

    func onFire(_ body: @escaping @Sendable () -> Void) {
        let now = lock.withLock { () -> Bool in
            if fired { return true }
            waiting.append(body)
            return false
        }
        if now { body() }
    }
}

/// Numbers the daemon's connections (handoff tickets name the connection they are for).
enum ConnectionNumbers {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var last: UInt64 = 0
    static func next() -> UInt64 { lock.withLock { last += 1; return last } }
}

/// One connection's `ContextTable`, shared by its concurrent requests.
final class ConnectionContexts: @unchecked Sendable {
    private let lock = NSLock()
    private var table = ContextTable<RunningRequest>()

    func callAsFunction<T>(_ body: (inout ContextTable<RunningRequest>) throws -> T) rethrows -> T {
        try lock.withLock { try body(&table) }
    }
}

/// Turns each request of one connection into work on the user's session. Identity comes from the
/// peer credentials taken when the connection was accepted.
final class ConnectionHandler: @unchecked Sendable {
    let peer: PeerIdentity
    private let daemon: EnclaveDaemon
    private let sink: any ReplySink
    private let contexts = ConnectionContexts()
    /// What the client handed over (`handoff`): the terminal its prompts are drawn on, the pipe
    /// its administration's secrets are read from.
    private let handed = HandedDescriptors()
    /// This connection among the daemon's, for its handoff tickets.
    private let number = ConnectionNumbers.next()
    /// Ends what waits for the person (`PersonSecrets`) when the connection closes.
    private let closing = ClosingSignal()
    /// Whether a request of this connection waits for the person now.
    private let waitingForThePerson = OneAtATime()
    /// Set when this connection is the prompt agent serving its session.
    private let agentLock = NSLock()
    private var _agent: PromptAgent?
    private var servedAgent: PromptAgent? { agentLock.withLock { _agent } }
    private let logger: Logger
    private let greetedLock = NSLock()
    private var _greeted = false
    /// Whether the connection said hello (read by the hello deadline on the event loop).
    var greeted: Bool {
        get { greetedLock.withLock { _greeted } }
        set { greetedLock.withLock { _greeted = newValue } }
    }

    /// Requests that run on their own (evaluations, keychain and key calls), for `run()`.
    private let jobs: AsyncStream<@Sendable () async -> Void>
    private let jobQueue: AsyncStream<@Sendable () async -> Void>.Continuation

    /// The connection's event loop as a task executor (`SocketServer`; nil in-process): where its
    /// evaluations run their sensor captures, so a reading reaches the evaluation on the thread
    /// it runs on.
    private let executor: (any TaskExecutor)?

    init(peer: PeerIdentity, daemon: EnclaveDaemon, sink: any ReplySink, logger: Logger, executor: (any TaskExecutor)? = nil) {
        self.peer = peer; self.daemon = daemon; self.sink = sink; self.logger = logger; self.executor = executor
        (jobs, jobQueue) = AsyncStream.makeStream()
    }

    /// Runs the connection's requests as child tasks of one task group, until `closed()`, then
    /// waits for every one of them: nothing a connection started outlives it. Run it beside the
    /// loop that feeds `receive`.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await job in jobs { group.addTask { await job() } }
        }
    }

    /// Called for each complete frame, in order. Returns false when the connection must close.
    func receive(_ payload: [UInt8]) async -> Bool {
        let envelope: RequestEnvelope
        do { envelope = try RequestEnvelope.decode(payload) } catch let e as RequestDecodingError {
            let code: FailureCode = e.kind == .unknownOperation ? .unknownOperation : (e.kind == .malformed ? .malformedMessage : .invalidParameter)
            await sink.send(ReplyEnvelope(id: e.id ?? 0, reply: .failure(Failure(code, e.detail))))
            return true
        } catch {
            await sink.send(ReplyEnvelope(id: 0, reply: .failure(Failure(.malformedMessage, "\(error)"))))
            return true
        }
        let id = envelope.id
        if case .hello(let version) = envelope.request {
            guard version == enclaveProtocolVersion else {
                await sink.send(ReplyEnvelope(id: id, reply: .failure(Failure(.unsupportedVersion, "this daemon speaks protocol version \(enclaveProtocolVersion), not \(version)"))))
                return false
            }
            greeted = true
            await sink.send(ReplyEnvelope(id: id, reply: .hello(HelloReply(version: enclaveProtocolVersion, mode: daemon.config.mode, uid: peer.uid, app: peer.app))))
            return true
        }
        guard greeted else {
            await sink.send(ReplyEnvelope(id: id, reply: .failure(Failure(.outOfOrder, "the first request on a connection must be hello"))))
            return true
        }
        // A request that waits for the person runs on its own, so the connection keeps reading:
        // its close is seen at once and ends the prompt (`closing`).
        // One at a time per connection: each holds a prompt or a reader thread while it waits.
        if AdminPolicy.purpose(of: envelope.request) != nil {
            guard waitingForThePerson.begin() else {
                await sink.send(ReplyEnvelope(id: id, reply: .failure(Failure(.busy, "this connection is already waiting for the person"))))
                return true
            }
            jobQueue.yield { [self] in
                let reply = await answer(envelope)
                // Free before the answer leaves: the client may send its next such request at once.
                waitingForThePerson.end()
                if let reply { await sink.send(ReplyEnvelope(id: id, reply: reply)) }
            }
        } else if let reply = await answer(envelope) {
            await sink.send(ReplyEnvelope(id: id, reply: reply))
        }
        return true
    }

    private func answer(_ envelope: RequestEnvelope) async -> Reply? {
        do {
            return try await handle(envelope)
        } catch let failure as Failure {
            return .failure(failure)
        } catch {
            logger.error("request failed", metadata: ["op": "\(envelope.request.operation)", "error": "\(error)"])
            return .failure(Failure(.internalError, "the daemon could not complete \(envelope.request.operation)"))
        }
    }

    /// The connection ended: every request on it ends, and `run()` returns once they have. When the
    /// daemon itself is stopping, the evaluations answer systemCancel (the client is still there
    /// to read it); otherwise the client went away and they end with appCancel.
    func closed() {
        let input = daemon.stopping.endingInput
        contexts { $0.close() }.forEach { $0.end(input) }
        daemon.handoff.revoke(connection: number)
        closing.fire()
        handed.close()
        jobQueue.finish()
    }

    private func policy(_ raw: Int) throws -> PolicyValue {
        guard let p = PolicyValue(rawValue: raw) else { throw Failure(.invalidParameter, "\(raw) is not an LAPolicy value") }
        return p
    }

    private func checkContext(_ id: String) throws {
        guard !id.isEmpty, id.utf8.count <= 64 else { throw Failure(.invalidParameter, "a context id has 1 to 64 bytes") }
    }

    private func checkText(_ text: String?, _ name: String, allowEmpty: Bool = true) throws {
        guard let text else { return }
        if !allowEmpty && text.isEmpty { throw Failure(.invalidParameter, "\(name) must not be empty") }
        if text.utf8.count > WireLimits.maxTextBytes { throw Failure(.invalidParameter, "\(name) is longer than \(WireLimits.maxTextBytes) bytes") }
    }

    /// A passcode longer than the wire limit can never be right: bad input, not a counted attempt.
    private func checkPasscodeLength(_ passcode: String?, _ name: String) throws {
        guard let passcode else { return }
        if passcode.utf8.count > WireLimits.maxPasscodeBytes { throw Failure(.invalidParameter, "\(name) is longer than \(WireLimits.maxPasscodeBytes) bytes") }
    }

    private func auditEntry(_ operation: String, policy: Int? = nil, result: String) -> AuditEntry {
        AuditEntry(time: Date(), uid: peer.uid, pid: peer.pid, app: peer.app, operation: operation, policy: policy, result: result)
    }

    /// Records an entry with the next group commit (see `AuditLog`).
    private func audit(_ operation: String, policy: Int? = nil, result: String) {
        daemon.auditLog.append(auditEntry(operation, policy: policy, result: result))
    }

    /// Runs `body`, auditing success or the failure code; never records arguments.
    private func audited<T>(_ operation: String, _ body: () async throws -> T) async throws -> T {
        do {
            let value = try await body()
            audit(operation, result: "ok")
            return value
        } catch let f as Failure {
            audit(operation, result: f.code.rawValue)
            throw f
        }
    }

    private func handle(_ envelope: RequestEnvelope) async throws -> Reply? {
        var sessionUser = peer.uid
        if peer.identity.kind == .administrator {
            guard AdminPolicy.administratorMay(envelope.request.operation) else { throw AdminPolicy.administratorRefusal }
            sessionUser = daemon.servedUser
        }
        let session = try daemon.session(for: sessionUser)
        switch envelope.request {
        case .hello:
            return nil
        case .canEvaluate(let ctx, let raw):
            try checkContext(ctx)
            let p = try policy(raw)
            if !(try contexts { try $0.use(ctx) }) {
                return .canEvaluate(CanEvaluateReply(biometryType: daemon.sensor?.info.kind ?? .none, error: .invalidContext, message: "Invalid context.", domainState: nil))
            }
            return .canEvaluate(try await session.canEvaluate(policy: p, app: peer.app))
        case .evaluate(let ctx, let raw, let options):
            try checkContext(ctx)
            let p = try policy(raw)
            try checkText(options.reason, "localizedReason", allowEmpty: false)
            try checkText(options.cancelTitle, "localizedCancelTitle")
            try checkText(options.fallbackTitle, "localizedFallbackTitle")
            guard options.reuseDuration.isFinite, options.reuseDuration >= 0 else {
                throw Failure(.invalidParameter, "touchIDAuthenticationAllowableReuseDuration must be a finite number ≥ 0")
            }
            try startEvaluation(id: envelope.id, context: ctx, policy: p, options: options, session: session)
            return nil
        case .authorizeAccessControl(let ctx, let flags, let options):
            try checkContext(ctx)
            try checkText(options.reason, "localizedReason", allowEmpty: false)
            do { _ = try AccessRequirement(flags: flags) } catch { throw Failure(.invalidParameter, "\(error)") }
            try startAccessControl(id: envelope.id, context: ctx, flags: flags, options: options, session: session)
            return nil
        case .handoff(let kind):
            let owner = HandoffTickets<HandedDescriptors>.Owner(uid: peer.uid, pid: peer.pid)
            return .handoffTicket(daemon.handoff.issue(to: owner, connection: number, kind: kind, destination: handed))
        case .invalidate(let ctx):
            try checkContext(ctx)
            contexts { $0.invalidate(ctx) }.forEach { $0.end() }
            return .ok
        case .domainState:
            return .domainState(DomainStateReply(biometryType: daemon.sensor?.info.kind ?? .none, stateHash: try await session.domainState(app: peer.app)))
        case .status:
            var status = try await session.status(app: peer.app)
            status.promptAgent = daemon.promptAgents.agent(serving: peer) != nil
            return .status(status)
        case .setPasscode:
            let new = try await secrets(for: envelope.request, session: session).newPasscode()
            try await audited("passcode.set") { try await session.setPasscode(current: nil, new: new) }
            return .ok
        case .changePasscode:
            let (current, new) = try await secrets(for: envelope.request, session: session).currentAndNewPasscode()
            try await audited("passcode.change") { try await session.setPasscode(current: current, new: new) }
            return .ok
        case .removePasscode:
            let current = try await secrets(for: envelope.request, session: session).passcode()
            try await audited("passcode.remove") { try await session.removePasscode(current: current) }
            return .ok
        case .enroll(let name):
            let passcode = try await secrets(for: envelope.request, session: session).passcode()
            // A real reader's stages go to the client as they pass, in order, before the final ok.
            let (stages, forward) = AsyncStream<EnrolmentProgress>.makeStream()
            let sink = self.sink
            let id = envelope.id
            let forwarding = Task { for await p in stages { await sink.send(ReplyEnvelope(id: id, reply: .enrollProgress(p))) } }
            defer { forwarding.cancel() }
            do {
                try await audited("enroll") { try await session.enroll(passcode: passcode, name: name, progress: { forward.yield($0) }) }
            } catch {
                forward.finish()
                await forwarding.value
                throw error
            }
            forward.finish()
            await forwarding.value
            return .ok
        case .unenroll(let name):
            let passcode = try await secrets(for: envelope.request, session: session).passcode()
            try await audited("unenroll") { try await session.unenroll(passcode: passcode, name: name) }
            return .ok
        case .simulate(let events):
            try await session.simulate(events)
            return .ok
        case .clearSimulated:
            await session.clearSimulated()
            return .ok
        case .audit(let limit, let everyApp):
            let limit = min(max(limit, 1), 500)
            switch AdminPolicy.auditScope(caller: peer.uid, mode: daemon.config.mode, everyApp: everyApp) {
            case .everyUser:
                return .audit(try daemon.auditLog.read(uid: nil, app: nil, limit: limit))
            case .everyAppOfCaller:
                try await session.confirmPasscode(try await secrets(for: envelope.request, session: session).passcode())
                return .audit(try daemon.auditLog.read(uid: peer.uid, app: nil, limit: limit))
            case .callingApp:
                return .audit(try daemon.auditLog.read(uid: peer.uid, app: peer.app, limit: limit))
            }
        case .resetPasscodeLockout(let uid):
            let target = try await administered(uid)
            switch try AdminPolicy.passcodeLockoutReset(caller: peer.uid, mode: daemon.config.mode) {
            case .administrator:
                try await audited("admin.resetPasscodeLockout") { try await target.resetPasscodeLockout() }
            case .loginPassword:
                let password = try await secrets(for: envelope.request, session: target).loginPassword()
                try await audited("passcode.resetByLoginPassword") { try await target.resetPasscodeLockout(loginPassword: password) }
            }
            return .ok
        case .remoteLock(let uid):
            let target = try await administered(uid)
            try await audited("admin.remoteLock") { try await target.remoteLock() }
            return .ok
        case .keychainAdd(let k): try startKeychain(id: envelope.id, .add, k, session: session); return nil
        case .keychainCopy(let k): try startKeychain(id: envelope.id, .copy, k, session: session); return nil
        case .keychainUpdate(let k): try startKeychain(id: envelope.id, .update, k, session: session); return nil
        case .keychainDelete(let k): try startKeychain(id: envelope.id, .delete, k, session: session); return nil
        case .key(let k): try startKeyOperation(id: envelope.id, k, session: session); return nil
        case .configureAccessGroup(let name, let apps):
            let passcode = try await secrets(for: envelope.request, session: session).passcode()
            try await audited("keychain.group") { try await session.configureAccessGroup(passcode: passcode, name: name, apps: apps) }
            return .ok
        case .accessGroups:
            return .accessGroups(try await session.accessGroups(passcode: try await secrets(for: envelope.request, session: session).passcode()))
        case .enrolments:
            return .enrolments(try await session.enrolments(passcode: try await secrets(for: envelope.request, session: session).passcode()))
        case .keychainList:
            let passcode = try await secrets(for: envelope.request, session: session).passcode()
            return .keychainListing(try await audited("keychain.list") { try await session.keychainList(passcode: passcode) })
        case .keychainRemove(let ref):
            let passcode = try await secrets(for: envelope.request, session: session).passcode()
            try await audited("keychain.remove") { try await session.keychainRemove(passcode: passcode, persistentRef: ref) }
            return .ok
        case .servePrompts:
            return try await servePrompts(requestID: envelope.id)
        case .promptAction(let prompt, let action):
            guard let agent = servedAgent else {
                throw Failure(.notPermitted, "only the prompt agent serving this session answers prompts")
            }
            guard agent.answer(prompt, action) else {
                throw Failure(.invalidParameter, "prompt \(prompt) is not open on this agent, or its screen offers no \(action.kind.rawValue)")
            }
            return .ok
        }
    }

    /// `servePrompts`: this connection becomes the prompt agent of its seat, if the kernel says it
    /// is the installed agent and no other agent serves the seat. No final reply while it serves.
    private func servePrompts(requestID: UInt64) async throws -> Reply? {
        let path = daemon.config.promptAgentPath
        guard PromptAgents<PromptAgent>.admits(peer.identity, agentPath: path) else {
            logger.warning("refused a prompt agent", metadata: ["app": "\(peer.app)", "uid": "\(peer.uid)"])
            throw Failure(.notPermitted, "only the prompt agent (\(path ?? "none is configured")) may draw prompts; this is \(peer.app)")
        }
        let registry = daemon.promptAgents
        let logger = self.logger
        let agent = PromptAgent(connection: number, seat: peer.seat,
                                requestID: requestID, sink: sink, answerTimeout: daemon.config.promptAgentAnswerTimeout,
                                onUnresponsive: { agent in
                                    registry.remove(connection: agent.connection)
                                    logger.warning("the prompt agent did not answer: dropped", metadata: ["seat": "\(agent.seat)"])
                                    Task { await agent.dismiss(Failure(.busy, "the agent did not show a prompt within \(Int(agent.answerTimeout)) s: it no longer serves")) }
                                })
        guard agentLock.withLock({ () -> Bool in
            guard _agent == nil else { return false }
            _agent = agent
            return true
        }) else { throw Failure(.busy, "this connection already serves the prompts of its session") }
        if case .refused(let why) = registry.register(agent) {
            agentLock.withLock { _agent = nil }
            throw Failure(.busy, why)
        }
        // Runs at once if the connection closed meanwhile.
        closing.onFire {
            registry.remove(connection: agent.connection)
            agent.end()
            logger.info("prompt agent left", metadata: ["seat": "\(agent.seat)"])
        }
        logger.info("prompt agent serves", metadata: ["seat": "\(agent.seat)", "pid": "\(peer.pid)"])
        await agent.announce()
        return nil
    }

    /// Where this request's passcode comes from: the person, on the trusted prompt or through the
    /// pipe the client handed (`PersonSecrets`).
    private func secrets(for request: Request, session: UserSession) -> PersonSecrets {
        PersonSecrets(descriptors: handed, app: peer.app, purpose: AdminPolicy.purpose(of: request) ?? "\(request.operation.rawValue)",
                      session: session, closing: closing, agent: daemon.promptAgents.agent(serving: peer))
    }

    private func administered(_ uid: UInt32?) async throws -> UserSession {
        try daemon.session(for: try AdminPolicy.target(uid, caller: peer.uid, mode: daemon.config.mode, servedUser: daemon.servedUser))
    }

    private func startEvaluation(id: UInt64, context: String, policy: PolicyValue, options: EvaluationOptions, session: UserSession) throws {
        let sink = self.sink
        // The context is taken here, in the order requests arrive: of two evaluations sent on one
        // context, the second is the one refused, whichever task the runtime starts first.
        let slot = takeSlot(context)
        do {
            try start(on: context) {
                await self.evaluateAndAnswer(id: id, context: context, policy: policy, options: options, session: session, slot: slot, sink: sink)
            }
        } catch {
            if case .started = slot.admission { contexts { $0.finish(context, proven: nil, now: daemon.clock.monotonic(), lifetime: 0) } }
            throw error
        }
    }

    private func evaluateAndAnswer(id: UInt64, context: String, policy: PolicyValue, options: EvaluationOptions, session: UserSession,
                                   slot: EvaluationSlot, sink: any ReplySink) async {
        let report = await self.runEvaluation(requestID: id, context: context, policy: policy, passcodeOnly: false,
                                              options: options, session: session, audited: "evaluate", slot: slot)
        let result: EvaluationResult
        let auditResult: String
        switch report.outcome {
        case .success:
            result = EvaluationResult(success: true, error: nil, message: nil, biometryType: report.biometryType, domainState: report.domainState)
        case .failure(let code, let message):
            result = EvaluationResult(success: false, error: code, message: message, biometryType: report.biometryType, domainState: nil)
        }
        auditResult = Self.describe(report.outcome)
        if !report.audited { self.audit("evaluate", policy: policy.rawValue, result: auditResult) }
        await sink.send(ReplyEnvelope(id: id, reply: .evaluated(result)))
    }

    /// An evaluation's place on its context (or why it has none), and the inputs it will read.
    struct EvaluationSlot: Sendable {
        let admission: ContextTable<RunningRequest>.Admission
        let inputs: AsyncStream<SessionInput>
        let continuation: AsyncStream<SessionInput>.Continuation
    }

    private func takeSlot(_ context: String) -> EvaluationSlot {
        let (inputs, continuation) = AsyncStream<SessionInput>.makeStream()
        let admission = (try? contexts { try $0.admit(context, evaluation: RunningRequest(inputs: continuation)) }) ?? .invalidated
        return EvaluationSlot(admission: admission, inputs: inputs, continuation: continuation)
    }

    /// An outcome as the audit log records it: "success(biometric)", "userCancel(-2)"…
    static func describe(_ outcome: EvaluationMachine.Outcome) -> String {
        switch outcome {
        case .success(let how): return "success(\(how))"
        case .failure(let code, _): return "\(code)(\(code.rawValue))"
        }
    }

    /// Runs a request as a task of its own, tracked on its context so that invalidation and
    /// disconnection end it. On an invalidated context the request still runs (one that needs no
    /// authentication answers as usual; an evaluation finds the context invalid), untracked.
    private func start(on context: String, _ body: @escaping @Sendable () async -> Void) throws {
        let contexts = self.contexts
        let (stop, stopper) = AsyncStream<Never>.makeStream()
        guard let ticket = try contexts({ try $0.track(context, RunningRequest(stop: stopper)) }) else {
            jobQueue.yield(body)
            return
        }
        jobQueue.yield {
            // The request, or its end when its context or connection goes: whichever comes first.
            await withTaskGroup(of: Void.self) { race in
                race.addTask { await body() }
                race.addTask { for await _ in stop {} }
                _ = await race.next()
                race.cancelAll()
            }
            contexts { $0.untrack(context, ticket: ticket) }
        }
    }

    /// One evaluation on a context: registers it to receive prompt input and `invalidate`, runs it
    /// in the user's session, and records the context's authorization on success.
    /// The evaluation's audit entry is written with the record when the evaluation changed it
    /// (`report.audited`); otherwise the caller records it.
    private func runEvaluation(requestID id: UInt64, context: String, policy: PolicyValue, passcodeOnly: Bool,
                               options: EvaluationOptions, session: UserSession, audited operation: String,
                               slot taken: EvaluationSlot? = nil) async -> EvaluationReport {
        let kind = daemon.sensor?.info.kind ?? .none
        let slot = taken ?? takeSlot(context)
        let (stream, continuation) = (slot.inputs, slot.continuation)
        guard case .started(let authorization) = slot.admission else {
            if case .busy = slot.admission {
                return EvaluationReport(outcome: .failure(.systemCancel, "An evaluation is already running on this context."), biometryType: kind, domainState: nil)
            }
            return EvaluationReport(outcome: .failure(.invalidContext, "Invalid context."), biometryType: kind, domainState: nil)
        }
        // The agent of the app's session draws the prompt; else the daemon draws it on the handed
        // terminal and reads the keys there; else it is headless and its screens go to the client.
        let (sink, handed) = (self.sink, self.handed)
        let nextPresenter: () -> any PromptPresenter = {
            if options.onTerminal, let fd = handed.duplicateTerminal() {
                return TerminalPrompt(fd: fd, onAction: { continuation.yield(Self.input(for: $0)) },
                                      onLost: { continuation.yield(.machine(.systemCancel("The terminal the prompt was shown on closed."))) })
            }
            return HeadlessPrompt(sink: sink, requestID: id)
        }
        let prompt = PromptRoute.starting(on: daemon.promptAgents.agent(serving: peer), onAction: { continuation.yield(Self.input(for: $0)) },
                                          then: nextPresenter, exhausted: {})
        let report = await session.evaluate(
            policy: policy, passcodeOnly: passcodeOnly, options: options, app: peer.app, authorization: authorization,
            inputs: stream, continuation: continuation, captureExecutor: executor, show: { await prompt.show($0) },
            audit: { [self] outcome in auditEntry(operation, policy: policy.rawValue, result: Self.describe(outcome)) })
        await prompt.close(result: Self.closingLine(report.outcome))
        let clock = daemon.clock
        let lifetime = daemon.config.contextLifetime
        let now = clock.monotonic()
        var proven: ContextAuthorization?
        if case .success(let how) = report.outcome, how != .contextAuthorized {
            proven = ContextAuthorization(at: now, biometric: how == .biometric || how == .reused, passcode: how == .passcode)
        }
        contexts { $0.finish(context, proven: proven, now: now, lifetime: lifetime) }
        return report
    }

    /// What a key on the trusted terminal prompt means to the evaluation.
    static func input(for action: PromptKeyboard.Action) -> SessionInput {
        switch action {
        case .cancel, .escape: return .machine(.cancel)
        case .fallback: return .machine(.fallback)
        case .retry: return .machine(.retry)
        case .passcode(let p): return .machine(.passcodeTyped(p))
        case .simulatedMatch: return .touch(.match)
        case .simulatedNoMatch: return .touch(.noMatch)
        }
    }

    /// The prompt's last line on the terminal.
    static func closingLine(_ outcome: EvaluationMachine.Outcome) -> String {
        switch outcome {
        case .success: return "authenticated"
        case .failure(_, let message): return message
        }
    }

    /// Proves one step of an access control on the request's context, auditing the result.
    private func authorizer(requestID id: UInt64, context: String, onTerminal: Bool, audited operation: String,
                            session: UserSession, base: EvaluationOptions? = nil) -> StepAuthorizer {
        { step, reason, noUI in
            var options = base ?? EvaluationOptions(reason: reason)
            options.reason = reason
            options.interactionNotAllowed = noUI
            options.onTerminal = onTerminal
            let policy: PolicyValue
            switch step {
            case .biometric: policy = .deviceOwnerAuthenticationWithBiometrics
            case .owner, .passcode: policy = .deviceOwnerAuthentication
            case .companion: return .failure(.companionNotAvailable, "No companion device is available.")
            }
            let report = await self.runEvaluation(requestID: id, context: context, policy: policy, passcodeOnly: step == .passcode,
                                                  options: options, session: session, audited: operation)
            if !report.audited { self.audit(operation, policy: policy.rawValue, result: Self.describe(report.outcome)) }
            return report.outcome
        }
    }

    /// `evaluateAccessControl`: the access control's steps in order on the context; the answer
    /// is an `evaluated` reply like `evaluate`'s.
    private func startAccessControl(id: UInt64, context: String, flags: AccessControlFlags, options: EvaluationOptions,
                                    session: UserSession) throws {
        let sink = self.sink
        let kind = daemon.sensor?.info.kind ?? .none
        let authorize = authorizer(requestID: id, context: context, onTerminal: options.onTerminal,
                                   audited: "accessControl.authorize", session: session, base: options)
        let prover = AccessProver(state: { try await session.accessState() }, authorize: authorize)
        try start(on: context) {
            var result = EvaluationResult(success: true, error: nil, message: nil, biometryType: kind, domainState: nil)
            do throws(AccessDenial) {
                try await prover.prove(AccessPlan.Protected(flags: flags, protection: nil, enrolmentGeneration: nil),
                                       reason: options.reason, noUI: options.interactionNotAllowed)
            } catch {
                result = EvaluationResult(error, biometryType: kind)
            }
            await sink.send(ReplyEnvelope(id: id, reply: .evaluated(result)))
        }
    }

    private func startKeyOperation(id: UInt64, _ k: KeyRequest, session: UserSession) throws {
        try checkContext(k.context)
        try checkText(k.reason, "localizedReason")
        let sink = self.sink
        try start(on: k.context) {
            let reply = await session.keyOperation(k, app: self.peer.identity,
                                                   authorize: self.authorizer(requestID: id, context: k.context, onTerminal: k.onTerminal,
                                                                              audited: "key.authorize", session: session))
            if k.operation != .open { self.audit("key.\(k.operation.rawValue)", result: reply.problem?.rawValue ?? "ok") }
            await sink.send(ReplyEnvelope(id: id, reply: .key(reply)))
        }
    }

    private func startKeychain(id: UInt64, _ operation: KeychainOperation, _ k: KeychainRequest, session: UserSession) throws {
        try checkContext(k.context)
        try checkText(k.reason, "kSecUseOperationPrompt")
        try checkPasscodeLength(k.applicationPassword.map { String(decoding: $0, as: UTF8.self) }, "application password")
        guard k.attributes.count <= 64, (k.changes?.count ?? 0) <= 64 else { throw Failure(.invalidParameter, "at most 64 attributes") }
        let sink = self.sink
        try start(on: k.context) {
            let reply = await session.keychain(operation, k, app: self.peer.identity,
                                               authorize: self.authorizer(requestID: id, context: k.context, onTerminal: k.onTerminal,
                                                                          audited: "keychain.authorize", session: session))
            // Changes and failures are recorded; a successful read is recorded through its
            // authorization steps (keychain.authorize), and a read that needed none is not: that
            // keeps reads free of a durable write.
            if operation != .copy || reply.status != .success {
                self.audit("keychain.\(operation.rawValue)", result: reply.status == .success ? "ok" : "status \(reply.status)")
            }
            await sink.send(ReplyEnvelope(id: id, reply: .keychain(reply)))
        }
    }
}
