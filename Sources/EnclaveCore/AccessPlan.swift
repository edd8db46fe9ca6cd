import EnclaveProtocol

/// What a protected keychain item or Secure Enclave key needs right now: nothing, these steps
/// proven on the request's context, or nothing ever again. The one place that decides it, for
/// items, keys and `evaluateAccessControl` alike; `AccessProofs` walks its steps, and the shell
/// asks again after the prompt (the enrolment may change while a prompt is open).
public enum AccessPlan: Equatable, Sendable {
    case open
    case prove([EvaluationStep])
    case invalidated(Invalidation)

    public enum Invalidation: Equatable, Sendable {
        /// `biometryCurrentSet` (without a passcode alternative) after an enrolment change.
        case enrolmentChanged
        /// `…WhenPasscodeSetThisDeviceOnly` after the passcode was removed (even if a new one is set).
        case passcodeRemoved
        /// The stored flags are not ones this daemon writes: damaged or tampered with.
        case unreadable
    }

    /// What was recorded when the item or key was made.
    public struct Protected: Equatable, Sendable {
        public var flags: AccessControlFlags
        public var protection: Protection?
        /// The enrolment generation at creation; nil when not bound to one (`evaluateAccessControl`).
        public var enrolmentGeneration: UInt64?
        /// The passcode epoch at creation; nil when not recorded (keychain items are deleted with
        /// the passcode instead).
        public var passcodeEpoch: UInt64?
        public init(
            flags: AccessControlFlags,
            protection: Protection?,
            enrolmentGeneration: UInt64?,
            passcodeEpoch: UInt64? = nil
        ) {
            self.flags = flags
            self.protection = protection
            self.enrolmentGeneration = enrolmentGeneration
            self.passcodeEpoch = passcodeEpoch
        }

        /// Whether the plan can change with the user's state (so the shell must read it afresh):
        /// only `biometryCurrentSet` bound to an enrolment (invalidated, or down to its passcode
        /// alternative) and `…WhenPasscodeSetThisDeviceOnly` (invalidated) change with it; every
        /// other plan is the same whatever the state.
        public var dependsOnState: Bool {
            (enrolmentGeneration != nil && flags.contains(.biometryCurrentSet))
                || protection == .whenPasscodeSetThisDeviceOnly
        }
    }

    /// The user's state the plan depends on.
    public struct UserState: Equatable, Sendable {
        public var enrolmentGeneration: UInt64
        public var passcodeEpoch: UInt64
        public var passcodeSet: Bool
        public init(enrolmentGeneration: UInt64, passcodeEpoch: UInt64, passcodeSet: Bool) {
            self.enrolmentGeneration = enrolmentGeneration
            self.passcodeEpoch = passcodeEpoch
            self.passcodeSet = passcodeSet
        }

        /// Any state, for a plan that depends on none (`evaluateAccessControl`).
        public static let unbound = UserState(enrolmentGeneration: 0, passcodeEpoch: 0, passcodeSet: true)
    }

    public init(_ protected: Protected, now: UserState) {
        guard let requirement = try? AccessRequirement(flags: protected.flags) else {
            self = .invalidated(.unreadable)
            return
        }
        if protected.protection == .whenPasscodeSetThisDeviceOnly
            && (!now.passcodeSet || protected.passcodeEpoch.map { $0 != now.passcodeEpoch } ?? false)
        {
            self = .invalidated(.passcodeRemoved)
            return
        }
        guard
            let steps = requirement.steps(
                madeAt: protected.enrolmentGeneration ?? now.enrolmentGeneration,
                enrolmentNow: now.enrolmentGeneration
            )
        else {
            self = .invalidated(.enrolmentChanged)
            return
        }
        self = steps.isEmpty ? .open : .prove(steps)
    }

    /// An access control nothing was made with (`evaluateAccessControl`): its plan depends on no
    /// stored state and is never invalidated by it.
    public init(accessControl flags: AccessControlFlags) {
        self.init(Protected(flags: flags, protection: nil, enrolmentGeneration: nil), now: .unbound)
    }

    public var isInvalidated: Bool {
        if case .invalidated = self { return true }
        return false
    }
}
