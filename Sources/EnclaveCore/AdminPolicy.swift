import EnclaveProtocol

/// Who may reach beyond their own app or their own user: the one place that decides it. These are
/// today's rules (the device passcode opens the user's own administration); the trust-line work
/// replaces the passcode with the trusted prompt here.
public enum AdminPolicy {
    /// Whose audit entries a request may read.
    public enum AuditScope: Equatable, Sendable {
        /// Every user's (root in system mode).
        case everyUser
        /// Every app of the caller's user; the passcode must be confirmed first.
        case everyAppOfCaller
        /// The calling app's own.
        case callingApp
    }

    /// The user whose state a request changes: the caller, or another user for root in system mode.
    public static func target(_ requested: UInt32?, caller: UInt32, mode: DaemonMode) throws(Failure) -> UInt32 {
        let target = requested ?? caller
        if target != caller && !(mode == .system && caller == 0) { throw Failure(.notPermitted, "only root may administer another user") }
        return target
    }

    /// Lifting one's own passcode counter would make guessing free: in system mode only root may.
    public static func checkPasscodeLockoutReset(caller: UInt32, mode: DaemonMode) throws(Failure) {
        if mode == .system && caller != 0 { throw Failure(.notPermitted, "only root may reset passcode attempts in system mode") }
    }

    /// Other apps' entries are the user's, not the app's: they need the passcode (or root in system
    /// mode, who sees every user's).
    public static func auditScope(caller: UInt32, mode: DaemonMode, passcodeGiven: Bool) -> AuditScope {
        if mode == .system && caller == 0 && !passcodeGiven { return .everyUser }
        return passcodeGiven ? .everyAppOfCaller : .callingApp
    }
}
