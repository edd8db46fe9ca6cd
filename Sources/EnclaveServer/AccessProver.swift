import EnclaveCore
import EnclaveProtocol

/// Proves one step of an access control on the request's context (the connection runs the
/// evaluation, so the context's authorization and prompt input work as for `evaluatePolicy`).
typealias StepAuthorizer = @Sendable (_ step: EvaluationStep, _ reason: String, _ noUI: Bool) async -> EvaluationMachine.Outcome

/// Why a protected item, key or access control was not opened. Mapped once per surface at the
/// edge: `KeychainStatus`, `KeyReply`, `EvaluationResult`.
enum AccessDenial: Error, Equatable {
    case invalidated(AccessPlan.Invalidation)
    /// A step was not proven: how the evaluation ended.
    case failed(LAErrorCode, String)
    /// The user's state could not be read.
    case unavailable(String)
}

/// The one "prove this access control" loop, for keychain items, Secure Enclave keys and
/// `evaluateAccessControl`: plan from the user's state now → prove each step on the request's
/// context → plan again after the prompt (other requests, an enrolment change among them, run
/// while it is open) → the caller opens.
struct AccessProver: Sendable {
    /// The user's state, read afresh (a real sensor's enrolment may have changed behind our back).
    let state: @Sendable () async throws -> AccessPlan.UserState
    let authorize: StepAuthorizer

    func plan(_ protected: AccessPlan.Protected) async throws(AccessDenial) -> AccessPlan {
        guard protected.dependsOnState else { return AccessPlan(protected, now: Self.unbound) }
        do { return AccessPlan(protected, now: try await state()) } catch { throw .unavailable("\(error)") }
    }

    /// Proves the access control; answers whether any step was proven — the request then waited,
    /// and other requests of the user may have changed what it read before.
    @discardableResult
    func prove(_ protected: AccessPlan.Protected, reason: String, noUI: Bool) async throws(AccessDenial) -> Bool {
        switch try await plan(protected) {
        case .open: return false
        case .invalidated(let why): throw .invalidated(why)
        case .prove(let steps):
            for step in steps {
                if case .failure(let code, let message) = await authorize(step, reason, noUI) { throw .failed(code, message) }
            }
        }
        if case .invalidated(let why) = try await plan(protected) { throw .invalidated(why) }
        return true
    }

    /// Any state: a plan that depends on none ignores it.
    private static let unbound = AccessPlan.UserState(enrolmentGeneration: 0, passcodeEpoch: 0, passcodeSet: true)
}

extension AccessPlan.Invalidation {
    /// In words, naming what is no longer usable.
    func message(_ what: String) -> String {
        switch self {
        case .enrolmentChanged:
            return "the \(what) was protected with biometryCurrentSet and the enrolled identities have changed since; it can never be used again, only deleted"
        case .passcodeRemoved: return "the \(what) needed a device passcode, which was removed; it can never be used again"
        case .unreadable: return "the \(what)'s access control is damaged; it can only be deleted"
        }
    }
}

// MARK: The edge: one mapping per surface

extension KeychainFailure {
    init(_ denial: AccessDenial) {
        switch denial {
        case .invalidated(let why): self.init(.invalidItemRef, why.message("item"))
        case .failed(let code, let message): self.init(KeychainStatus(authenticationFailure: code), message)
        case .unavailable(let why): self.init(.notAvailable, "the keychain could not read the user's state: \(why)")
        }
    }
}

extension KeychainStatus {
    /// The status a keychain call answers when a step of the item's access control failed.
    init(authenticationFailure code: LAErrorCode) {
        switch code {
        case .userCancel, .appCancel, .systemCancel, .userFallback: self = .userCanceled
        case .notInteractive: self = .interactionNotAllowed
        default: self = .authFailed
        }
    }
}

extension KeyReply {
    init(_ denial: AccessDenial) {
        switch denial {
        case .invalidated(let why): self.init(problem: .invalidated, message: why.message("key"))
        case .failed(let code, let message): self.init(problem: .authentication, message: message, authenticationError: code)
        case .unavailable(let why): self.init(problem: .notAvailable, message: "the key operation could not read the user's state: \(why)")
        }
    }
}

extension EvaluationResult {
    init(_ denial: AccessDenial, biometryType: BiometryKind) {
        switch denial {
        case .failed(let code, let message): self.init(success: false, error: code, message: message, biometryType: biometryType, domainState: nil)
        case .invalidated(let why): self.init(success: false, error: .authenticationFailed, message: why.message("access control"), biometryType: biometryType, domainState: nil)
        case .unavailable(let why): self.init(success: false, error: .systemCancel, message: why, biometryType: biometryType, domainState: nil)
        }
    }
}
