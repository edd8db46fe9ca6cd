import EnclaveProtocol

/// Who may reach beyond their own app or their own user: the one place that decides it. The device
/// passcode still opens the user's own administration; the trust-line work replaces it with the
/// trusted prompt here. The passcode counter is already out of every app's reach.
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
    /// A user-mode daemon has one user, `servedUser`, whoever asks (root visiting it included).
    public static func target(_ requested: UInt32?, caller: UInt32, mode: DaemonMode, servedUser: UInt32) throws(Failure) -> UInt32 {
        if mode == .user {
            let target = requested ?? servedUser
            if target != servedUser { throw Failure(.notPermitted, "this user-mode daemon serves uid \(servedUser) only") }
            return target
        }
        let target = requested ?? caller
        if target != caller && caller != 0 { throw Failure(.notPermitted, "only root may administer another user") }
        return target
    }

    /// Lifting the passcode counter makes guessing free for whoever does it, so no app may — in
    /// user mode either, where every client is the user's own (the user's apps are what guesses).
    /// Root may: in system mode as the daemon's administrator, in user mode by connecting to the
    /// user's daemon (`sudo lactl admin reset-passcode --uid UID`). Our rule; Apple has the device
    /// erased or restored from a computer the device trusts.
    public static func checkPasscodeLockoutReset(caller: UInt32, mode: DaemonMode) throws(Failure) {
        guard caller != 0 else { return }
        throw Failure(.notPermitted, mode == .system
            ? "only root may reset passcode attempts in system mode"
            : "only root may reset passcode attempts (sudo lactl admin reset-passcode --uid \(caller)): an app that could would make guessing free")
    }

    /// Root connected to a user-mode daemon that runs as another user: it lifts the passcode
    /// counter, and nothing else — everything else is the user's, and root has no session there.
    public static func administratorMay(_ operation: Request.Operation) -> Bool {
        operation == .hello || operation == .resetPasscodeLockout
    }

    public static let administratorRefusal = Failure(.notPermitted, "root reaches another user's daemon only to reset passcode attempts (lactl admin reset-passcode)")

    /// Other apps' entries are the user's, not the app's: they need the passcode (or root in system
    /// mode, who sees every user's).
    public static func auditScope(caller: UInt32, mode: DaemonMode, passcodeGiven: Bool) -> AuditScope {
        if mode == .system && caller == 0 && !passcodeGiven { return .everyUser }
        return passcodeGiven ? .everyAppOfCaller : .callingApp
    }
}
