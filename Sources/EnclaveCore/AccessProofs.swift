import EnclaveProtocol

/// Why a protected item, key or access control was not opened. Mapped once per surface at the
/// daemon's edge: `KeychainStatus`, `KeyReply`, `EvaluationResult`.
public enum AccessDenial: Error, Equatable, Sendable {
    case invalidated(AccessPlan.Invalidation)
    /// A step was not proven: how its evaluation ended.
    case failed(LAErrorCode, String)
    /// The user's state could not be read.
    case unavailable(String)
}

/// The proofs one protected request needs: which of its candidates (the items a keychain query
/// matched, a Secure Enclave key, an access control) to prove, step by step and in order, and what
/// a step that was not proven means. Pure: the connection proves each step it is given on the
/// request's context — through the evaluation path `evaluatePolicy` takes — and reports how it
/// ended; the user's session then opens what was accepted.
///
///     var next = proofs.next()
///     while case .prove(let step) = next { next = proofs.stepEnded(await evaluate(step)) }
public struct AccessProofs<Candidate: Sendable>: Sendable {
    /// What the request asks of its candidates.
    public struct Rules: Sendable, Equatable {
        /// How many usable candidates the request wants (a copy's limit; one for a single item).
        public var wanted: Int
        /// An invalidated candidate is left out (a copy of all matches) instead of denying the request.
        public var leaveOutInvalidated: Bool
        /// A candidate whose step could not be proven without a prompt is left out
        /// (`kSecUseAuthenticationUISkip`) instead of denying the request.
        public var leaveOutNotInteractive: Bool

        public init(wanted: Int, leaveOutInvalidated: Bool, leaveOutNotInteractive: Bool) {
            self.wanted = wanted; self.leaveOutInvalidated = leaveOutInvalidated; self.leaveOutNotInteractive = leaveOutNotInteractive
        }

        /// Every candidate must be usable (an update, a key, an access control).
        public static var every: Rules { Rules(wanted: .max, leaveOutInvalidated: false, leaveOutNotInteractive: false) }
    }

    public enum Next: Sendable {
        /// Prove this step of the current candidate on the request's context, then call `stepEnded`.
        case prove(EvaluationStep)
        /// The candidates to answer, in order, and whether any step was proven: the request then
        /// waited, and other requests (an enrolment change among them) may have run meanwhile, so
        /// the user's state is read again before anything is opened.
        case finished(accepted: [Candidate], proved: Bool)
        case denied(AccessDenial)
    }

    private let candidates: [(candidate: Candidate, plan: AccessPlan)]
    private let rules: Rules
    private var index = 0
    private var step = 0
    private var accepted: [Candidate] = []
    private var proved = false
    private var denial: AccessDenial?

    /// `candidates` with their plans, made from one reading of the user's state.
    public init(_ candidates: [(candidate: Candidate, plan: AccessPlan)], rules: Rules) {
        self.candidates = candidates
        self.rules = rules
    }

    /// What to do now. Asking again before `stepEnded` answers the same step.
    public mutating func next() -> Next {
        if let denial { return .denied(denial) }
        while index < candidates.count && accepted.count < rules.wanted {
            let (candidate, plan) = candidates[index]
            switch plan {
            case .open:
                accepted.append(candidate)
                moveOn()
            case .invalidated(let why):
                guard rules.leaveOutInvalidated else {
                    denial = .invalidated(why)
                    return .denied(.invalidated(why))
                }
                moveOn()
            case .prove(let steps):
                if step < steps.count { return .prove(steps[step]) }
                accepted.append(candidate)
                moveOn()
            }
        }
        return .finished(accepted: accepted, proved: proved)
    }

    /// How the step `next()` gave ended; answers what to do now.
    public mutating func stepEnded(_ outcome: EvaluationMachine.Outcome) -> Next {
        switch outcome {
        case .success:
            proved = true
            step += 1
        case .failure(let code, _) where code == .notInteractive && rules.leaveOutNotInteractive:
            moveOn()
        case .failure(let code, let message):
            denial = .failed(code, message)
        }
        return next()
    }

    private mutating func moveOn() {
        index += 1
        step = 0
    }
}

extension AccessPlan {
    /// Whether every plan is still usable with the user's state read after the proofs, the first
    /// that is not saying why (the enrolment may have changed or the passcode gone while a prompt
    /// was open).
    public static func stillUsable(_ protected: [Protected], now: UserState) throws(AccessDenial) {
        for p in protected {
            if case .invalidated(let why) = AccessPlan(p, now: now) { throw .invalidated(why) }
        }
    }
}
