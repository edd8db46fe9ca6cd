import EnclaveCore
import EnclaveProtocol

/// Evaluations on the connection's contexts: `evaluatePolicy`, and each step an access control
/// needs (`ConnectionHandler+AccessProofs`).
extension ConnectionHandler {
    func startEvaluation(id: UInt64, _ request: Request.Evaluate, session: UserSession) throws -> Job? {
        let (context, options) = (request.context, request.options)
        let policy = try ArgumentChecks.policy(request.policy)
        // The context is taken here, in the order requests arrive: of two evaluations sent on one
        // context, the second is the one refused, whichever task the runtime starts first.
        let slot = takeSlot(context)
        do {
            return try start(on: context) { end in
                await self.evaluateAndAnswer(
                    id: id,
                    context: context,
                    policy: policy,
                    options: options,
                    session: session,
                    slot: slot,
                    end: end
                )
            }
        } catch {
            if case .started = slot.admission { finishEvaluation(on: context, proven: nil) }
            throw error
        }
    }

    private func evaluateAndAnswer(
        id: UInt64,
        context: String,
        policy: PolicyValue,
        options: EvaluationOptions,
        session: UserSession,
        slot: EvaluationSlot,
        end: RequestEnd
    ) async {
        let report = await runEvaluation(
            requestID: id,
            context: context,
            policy: policy,
            passcodeOnly: false,
            options: options,
            session: session,
            audited: "evaluate",
            end: end,
            slot: slot
        )
        let result: EvaluationResult
        switch report.outcome {
        case .success:
            result = EvaluationResult(
                success: true,
                error: nil,
                message: nil,
                biometryType: report.biometryType,
                domainState: report.domainState
            )
        case .failure(let code, let message):
            result = EvaluationResult(
                success: false,
                error: code,
                message: message,
                biometryType: report.biometryType,
                domainState: nil
            )
        }
        if !report.audited { audit("evaluate", policy: policy.rawValue, result: Self.describe(report.outcome)) }
        sink.send(ReplyEnvelope(id: id, reply: .evaluated(result)))
    }

    /// An evaluation's place on its context (or why it has none), and the inputs it will read.
    struct EvaluationSlot: Sendable {
        let admission: ContextTable<RunningRequest>.Admission
        let inputs: AsyncStream<SessionInput>
        let continuation: AsyncStream<SessionInput>.Continuation
    }

    private func takeSlot(_ context: String) -> EvaluationSlot {
        let (inputs, continuation) = AsyncStream<SessionInput>.makeStream()
        let admission = state.withLock { $0.evaluationStarting(on: context, RunningRequest(inputs: continuation)) }
        return EvaluationSlot(admission: admission, inputs: inputs, continuation: continuation)
    }

    private func finishEvaluation(on context: String, proven: ContextAuthorization?) {
        let now = daemon.clock.monotonic()
        let lifetime = daemon.config.contextLifetime
        state.withLock { $0.evaluationFinished(on: context, proven: proven, now: now, lifetime: lifetime) }
    }

    /// An outcome as the audit log records it: "success(biometric)", "userCancel(-2)"…
    static func describe(_ outcome: EvaluationMachine.Outcome) -> String {
        switch outcome {
        case .success(let how): return "success(\(how))"
        case .failure(let code, _): return "\(code)(\(code.rawValue))"
        }
    }

    /// A request as a job of its own (`Received.job`), tracked on its context so that
    /// invalidation and disconnection end its evaluation and its wait for the user's prompt
    /// (`body` reads its `RequestEnd`); what it has already queued on a blocking pool (a TPM key
    /// use, a passcode check) still runs, and is answered to nobody. On an invalidated
    /// context the request still runs (one that needs no authentication answers as usual; an
    /// evaluation finds the context invalid), untracked; on a closed connection it does not run
    /// (nil). The job returned must be started: it is the context's until it ends.
    func start(on context: String, _ body: @escaping @Sendable (RequestEnd) async -> Void) throws -> Job? {
        let end = RequestEnd()
        switch try state.withLock({ try $0.requestStarting(on: context, RunningRequest(ending: end)) }) {
        case .closed:
            return nil
        case .untracked:
            return { await body(end) }
        case .tracked(let ticket):
            return { [self] in
                await body(end)
                state.withLock { $0.requestEnded(on: context, ticket: ticket) }
            }
        }
    }

    /// One evaluation on a context: registers it to receive prompt input and `invalidate`, runs it
    /// in the user's session, and records the context's authorization on success.
    /// The evaluation's audit entry is written with the record when the evaluation changed it
    /// (`report.audited`); otherwise the caller records it.
    func runEvaluation(
        requestID id: UInt64,
        context: String,
        policy: PolicyValue,
        passcodeOnly: Bool,
        options: EvaluationOptions,
        session: UserSession,
        audited operation: String,
        end: RequestEnd,
        slot taken: EvaluationSlot? = nil,
        pam: PAMEvaluationTerms? = nil
    ) async -> EvaluationReport {
        let kind = daemon.sensor?.info.kind ?? .none
        let slot = taken ?? takeSlot(context)
        let (stream, continuation) = (slot.inputs, slot.continuation)
        guard case .started(let authorization) = slot.admission else {
            if case .busy = slot.admission {
                return EvaluationReport(
                    outcome: .failure(.systemCancel, "An evaluation is already running on this context."),
                    biometryType: kind,
                    domainState: nil
                )
            }
            return EvaluationReport(
                outcome: .failure(.invalidContext, "Invalid context."),
                biometryType: kind,
                domainState: nil
            )
        }
        // The agent of the app's session draws the prompt; else the daemon draws it on the handed
        // terminal and reads the keys there; else it is headless and its screens go to the client.
        let (sink, handed) = (self.sink, self.handed)
        let nextPresenter: @Sendable () -> any PromptPresenter = {
            if options.onTerminal,
                let terminal = TerminalPrompt.on(
                    handed,
                    for: session,
                    onAction: { continuation.yield(Self.input(for: $0)) },
                    onLost: {
                        continuation.yield(.machine(.systemCancel("The terminal the prompt was shown on closed.")))
                    }
                )
            {
                return terminal
            }
            return HeadlessPrompt(sink: sink, requestID: id)
        }
        // A PAM authentication's prompt is where its decision put it: its agent going away ends it
        // (its password was offered there, and nowhere else), never a fall to a headless prompt.
        let onlyAgent = pam?.agent != nil
        let prompt = PromptRoute.starting(
            on: pam.map(\.agent) ?? daemon.promptAgents.agent(serving: peer),
            onAction: { continuation.yield(Self.input(for: $0)) },
            then: { onlyAgent ? nil : nextPresenter() },
            exhausted: { continuation.yield(.machine(.systemCancel("The prompt agent went away."))) }
        )
        let audit: @Sendable (EvaluationMachine.Outcome) -> AuditEntry
        if let pam {
            audit = pam.audit
        } else {
            audit = { [self] outcome in auditEntry(operation, policy: policy.rawValue, result: Self.describe(outcome)) }
        }
        let report = await session.evaluate(
            policy: policy,
            passcodeOnly: passcodeOnly,
            options: options,
            app: pam?.app ?? peer.app,
            authorization: authorization,
            inputs: stream,
            continuation: continuation,
            captureExecutor: executor,
            show: { prompt.show($0) },
            audit: audit,
            secret: pam?.secret ?? .devicePasscode,
            promptTimeout: pam?.promptTimeout,
            end: end
        )
        await prompt.close(result: Self.closingLine(report.outcome))
        var proven: ContextAuthorization?
        // A PAM authentication authorizes nothing of the connection's: its answer is all it gives.
        if case .success(let how) = report.outcome, how != .contextAuthorized, pam == nil {
            proven = ContextAuthorization(
                at: daemon.clock.monotonic(),
                biometric: how == .biometric || how == .reused,
                passcode: how == .passcode
            )
        }
        finishEvaluation(on: context, proven: proven)
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
}
