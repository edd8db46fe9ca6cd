import EnclaveCore
import EnclaveProtocol

/// Access controls proven on the connection's contexts. A protected request reads top-down: the
/// user's session reads its candidates and their plans (`keychainStart`, `keyStart`), the
/// connection proves each step on the request's context through the same `runEvaluation` that
/// `evaluatePolicy` uses, and the session opens what was accepted (`keychainFinish`, `keyFinish`).
extension ConnectionHandler {
    /// How the steps of one request are proven: on its context, with its reason, and audited
    /// under its operation.
    struct ProofRequest: Sendable {
        var id: UInt64
        var context: String
        /// The evaluation options each step runs with (reason, no-UI, terminal, titles).
        var options: EvaluationOptions
        var audited: String
        /// The request's end: each step's evaluation ends with it.
        var end: RequestEnd

        init(id: UInt64, context: String, options: EvaluationOptions, audited: String, end: RequestEnd) {
            self.id = id
            self.context = context
            self.options = options
            self.audited = audited
            self.end = end
        }

        init(
            id: UInt64,
            context: String,
            reason: String,
            noUI: Bool,
            onTerminal: Bool,
            audited: String,
            end: RequestEnd
        ) {
            var options = EvaluationOptions(reason: reason)
            options.interactionNotAllowed = noUI
            options.onTerminal = onTerminal
            self.init(id: id, context: context, options: options, audited: audited, end: end)
        }
    }

    /// Runs `proofs` to their end: each step they name is evaluated on the request's context.
    func prove<Candidate>(
        _ proofs: AccessProofs<Candidate>,
        _ request: ProofRequest,
        session: UserSession
    ) async throws(AccessDenial) -> (accepted: [Candidate], waited: Bool) {
        var proofs = proofs
        var next = proofs.next()
        while true {
            switch next {
            case .prove(let step): next = proofs.stepEnded(await evaluate(step, request, session: session))
            case .finished(let accepted, let waited): return (accepted, waited)
            case .denied(let denial): throw denial
            }
        }
    }

    /// One step, as the evaluation of its policy; audited unless the evaluation recorded itself.
    private func evaluate(
        _ step: EvaluationStep,
        _ request: ProofRequest,
        session: UserSession
    ) async -> EvaluationMachine.Outcome {
        let policy: PolicyValue
        switch step {
        case .biometric: policy = .deviceOwnerAuthenticationWithBiometrics
        case .owner, .passcode: policy = .deviceOwnerAuthentication
        case .companion: return .failure(.companionNotAvailable, "No companion device is available.")
        }
        let report = await runEvaluation(
            requestID: request.id,
            context: request.context,
            policy: policy,
            passcodeOnly: step == .passcode,
            options: request.options,
            session: session,
            audited: request.audited,
            end: request.end
        )
        if !report.audited { audit(request.audited, policy: policy.rawValue, result: Self.describe(report.outcome)) }
        return report.outcome
    }

    /// `evaluateAccessControl`: the access control's steps in order on the context; the answer
    /// is an `evaluated` reply like `evaluate`'s.
    func startAccessControl(id: UInt64, _ request: Request.AuthorizeAccessControl, session: UserSession) throws -> Job?
    {
        let (context, flags, options) = (request.context, request.flags, request.options)
        do { _ = try AccessRequirement(flags: flags) } catch { throw Failure(.invalidParameter, "\(error)") }
        let sink = self.sink
        let kind = daemon.sensor?.info.kind ?? .none
        // Nothing was made with it: no state to plan from, and nothing read again afterwards.
        let proofs = AccessProofs(
            [(candidate: flags, plan: AccessPlan(accessControl: flags))],
            rules: .every,
            planned: .unbound
        )
        return try start(on: context) { end in
            let proof = ProofRequest(
                id: id,
                context: context,
                options: options,
                audited: "accessControl.authorize",
                end: end
            )
            var result = EvaluationResult(success: true, error: nil, message: nil, biometryType: kind, domainState: nil)
            do throws(AccessDenial) { _ = try await self.prove(proofs, proof, session: session) } catch {
                result = EvaluationResult(error, biometryType: kind)
            }
            sink.send(ReplyEnvelope(id: id, reply: .evaluated(result)))
        }
    }
}
