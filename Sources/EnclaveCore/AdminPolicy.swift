import EnclaveProtocol

/// Who may reach beyond their own app or their own user: the one place that decides it. The user's
/// own administration is allowed by the person with the device passcode, asked by the daemon on the
/// trusted prompt (or read from a pipe a script handed it) — never taken from a request. The
/// passcode counter is out of every app's reach.
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
    public static func target(
        _ requested: UInt32?,
        caller: UInt32,
        mode: DaemonMode,
        servedUser: UInt32
    ) throws(Failure) -> UInt32 {
        if mode == .user {
            let target = requested ?? servedUser
            if target != servedUser {
                throw Failure(.notPermitted, "this user-mode daemon serves uid \(servedUser) only")
            }
            return target
        }
        let target = requested ?? caller
        if target != caller && caller != 0 { throw Failure(.notPermitted, "only root may administer another user") }
        return target
    }

    /// Who lifts a disabled passcode (its failure counter and delays).
    public enum PasscodeLockoutReset: Equatable, Sendable {
        /// Root, as the daemon's administrator.
        case administrator
        /// The person, with the login password on the trusted prompt, checked through PAM with a
        /// counter and delays of its own (`UserRecord.loginPasswordAttempts`).
        case loginPassword
    }

    /// Lifting the passcode counter makes guessing free for whoever does it, so no app may on its
    /// own — in user mode either, where every client is the user's own (the user's apps are what
    /// guesses). Root may: in system mode as the daemon's administrator, in user mode by connecting
    /// to the user's daemon (`sudo lactl admin reset-passcode --uid UID`). In user mode the person
    /// may too, with the login password, which no app is told and whose wrong guesses are counted
    /// and delayed on their own. Our rule; Apple has the device erased or restored from a computer
    /// the device trusts.
    public static func passcodeLockoutReset(caller: UInt32, mode: DaemonMode) throws(Failure) -> PasscodeLockoutReset {
        if caller == 0 { return .administrator }
        if mode == .user { return .loginPassword }
        throw Failure(.notPermitted, "only root may reset passcode attempts in system mode")
    }

    /// Root connected to a user-mode daemon that runs as another user: it lifts the passcode
    /// counter, and nothing else — everything else is the user's, and root has no session there.
    public static func administratorMay(_ operation: Request.Operation) -> Bool {
        operation == .hello || operation == .resetPasscodeLockout
    }

    /// Whether a pipe the client handed may give the person's passcode (`lactl … --stdin`): root's
    /// own requests, or where root or the daemon's starter allowed it
    /// (`DaemonConfiguration.administrationPipe`). Anywhere else, whoever writes into a pipe is
    /// an app — one that learned the passcode once (its own fake prompt, a shoulder-surfed code)
    /// would otherwise reach every app's items. Our rule (issue 33); Apple lets no app administer
    /// the device, whatever it knows.
    public static func pipeGivesThePasscode(caller: UInt32, allowed: Bool) -> Bool {
        caller == 0 || allowed
    }

    public static let pipeRefusal = Failure(
        .notPermitted,
        "a passcode through a pipe (--stdin) administers only where root allowed it: run this in your own terminal without --stdin, or answer the prompt agent; to provision as root, set administration-pipe = yes in /etc/laenclaved/laenclaved.conf"
    )

    public static let administratorRefusal = Failure(
        .notPermitted,
        "root reaches another user's daemon only to reset passcode attempts (lactl admin reset-passcode)"
    )

    /// Other apps' entries are the user's, not the app's: they need the passcode (or root in system
    /// mode, who sees every user's).
    public static func auditScope(caller: UInt32, mode: DaemonMode, everyApp: Bool) -> AuditScope {
        if mode == .system && caller == 0 && !everyApp { return .everyUser }
        return everyApp ? .everyAppOfCaller : .callingApp
    }

    /// What the person allows with the passcode, as the trusted prompt says it; nil for a request
    /// that asks nothing of the person. `app` is the verified identity of the app that asks.
    public static func purpose(of request: Request) -> String? {
        switch request {
        case .setPasscode: return "set the device passcode"
        case .changePasscode: return "change the device passcode"
        case .removePasscode:
            return
                "remove the device passcode: every item and key that needs it is deleted, and every enrolled identity"
        case .enroll(let a):
            return "enrol a new identity named \"\(a.name)\": it will unlock what your fingerprint or face unlocks"
        case .unenroll(let a): return "remove the enrolled identity \"\(a.name)\""
        case .audit(let a): return a.everyApp ? "read the audit entries of every app of yours" : nil
        case .keychainList:
            return "list the keychain items of every app of yours (names and access rules, never secrets)"
        case .keychainRemove: return "delete a keychain item, whichever of your apps it belongs to"
        case .configureAccessGroup(let a):
            return a.apps.isEmpty
                ? "remove the keychain access group \"\(a.name)\""
                : "let these apps share the keychain items of the group \"\(a.name)\": \(a.apps.joined(separator: ", "))"
        case .accessGroups: return "list your keychain access groups and their apps"
        case .resetPasscodeLockout: return "lift the disabled device passcode (its failure counter and delays)"
        case .enrolments: return "see the names of your enrolled identities"
        default: return nil
        }
    }
}
