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
            self.wanted = wanted
            self.leaveOutInvalidated = leaveOutInvalidated
            self.leaveOutNotInteractive = leaveOutNotInteractive
        }

        /// Every candidate must be usable (an update, a key, an access control).
        public static var every: Rules {
            Rules(wanted: .max, leaveOutInvalidated: false, leaveOutNotInteractive: false)
        }
    }

    public enum Next: Sendable {
        /// Prove this step of the current candidate on the request's context, then call `stepEnded`.
        case prove(EvaluationStep)
        /// The candidates to answer, in order, and whether any step was evaluated (proven or not):
        /// the request then waited, and other requests of the user (an enrolment change, the
        /// passcode's removal, a change to the items) may have run meanwhile, so what it read is
        /// read again before anything is opened.
        case finished(accepted: [Candidate], waited: Bool)
        case denied(AccessDenial)
    }

    private let candidates: [(candidate: Candidate, plan: AccessPlan)]
    private let rules: Rules
    /// The user's state the plans were made from (read again after the proofs, and compared).
    public let planned: AccessPlan.UserState
    private var index = 0
    private var step = 0
    private var accepted: [Candidate] = []
    private var waited = false
    private var denial: AccessDenial?

    /// `candidates` with their plans, made from one reading of the user's state (`planned`).
    public init(_ candidates: [(candidate: Candidate, plan: AccessPlan)], rules: Rules, planned: AccessPlan.UserState) {
        self.candidates = candidates
        self.rules = rules
        self.planned = planned
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
        return .finished(accepted: accepted, waited: waited)
    }

    /// How the step `next()` gave ended; answers what to do now.
    public mutating func stepEnded(_ outcome: EvaluationMachine.Outcome) -> Next {
        waited = true
        switch outcome {
        case .success:
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
    /// Whether every plan is still what was proven, with the user's state read after the proofs
    /// (`planned`: the state the plans were made from): the first that is not says why — it can no
    /// longer be used (the enrolment changed or the passcode went while a prompt was open), or it
    /// now asks for other steps than those proven (a finger proven for `biometryCurrentSet` or the
    /// passcode, when the enrolled set changed meanwhile: the finger may be the new one).
    public static func stillUsable(_ protected: [Protected], planned: UserState, now: UserState) throws(AccessDenial) {
        if let denial = protected.lazy.compactMap({ $0.denial(planned: planned, now: now) }).first { throw denial }
    }

    /// The candidates `stillUsable` would pass, the others left out (a copy of all matches).
    public static func usable<Candidate>(
        _ candidates: [Candidate],
        _ protected: (Candidate) -> Protected,
        planned: UserState,
        now: UserState
    ) -> [Candidate] {
        candidates.filter { protected($0).denial(planned: planned, now: now) == nil }
    }
}

extension AccessPlan.Protected {
    /// Why what was proven with the plan made from `planned` can no longer be opened with `now`.
    func denial(planned: AccessPlan.UserState, now: AccessPlan.UserState) -> AccessDenial? {
        let current = AccessPlan(self, now: now)
        if case .invalidated(let why) = current { return .invalidated(why) }
        guard current == AccessPlan(self, now: planned) else {
            return .failed(
                .authenticationFailed,
                "The enrolled identities or the passcode changed while the prompt was open; try again."
            )
        }
        return nil
    }
}
