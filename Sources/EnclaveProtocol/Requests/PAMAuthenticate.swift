extension Request {
    /// `pam_laenclave.so` asks the system daemon to authenticate PAM_USER for PAM_SERVICE (sudo,
    /// su, polkit's helper, a lock screen): a finger, or the login password, on the daemon's own
    /// prompt. Answered with one `pamAuthenticated`. What the daemon believes of it, and what it
    /// offers, is `PAMAuthenticationRules`' (EnclaveCore); the module never sends a reason or a
    /// password: the daemon writes the prompt and reads the keys on the handed terminal.
    public struct PAMAuthenticate: RequestArguments {
        /// PAM_USER: whom to authenticate.
        public var user: String
        /// PAM_SERVICE, PAM_TTY and PAM_RHOST as the module read them (believed from root alone).
        public var service: String
        public var tty: String?
        public var remoteHost: String?
        /// `password=` on the PAM line.
        public var password: PAMPasswordMode
        /// `reuse=` on the PAM line: a finger that matched this long ago for the same service,
        /// terminal and session passes without a prompt (at most `maximumReuse`).
        public var reuse: Double
        /// The module handed its controlling terminal (`handoff`) for the prompt.
        public var onTerminal: Bool
        /// `timeout=` on the PAM line: how long the prompt may stay open (nil: the daemon's choice,
        /// 60 s where it draws a prompt, 10 s where only a finger can answer). The daemon ends the
        /// prompt itself, and gives the terminal back, before it answers.
        public var timeout: Double?

        /// Apple's `LATouchIDAuthenticationMaximumAllowableReuseDuration`: no longer here either.
        public static let maximumReuse: Double = 300

        public init(
            user: String,
            service: String,
            tty: String? = nil,
            remoteHost: String? = nil,
            password: PAMPasswordMode = .login,
            reuse: Double = 0,
            onTerminal: Bool = false,
            timeout: Double? = nil
        ) {
            self.user = user
            self.service = service
            self.tty = tty
            self.remoteHost = remoteHost
            self.password = password
            self.reuse = reuse
            self.onTerminal = onTerminal
            self.timeout = timeout
        }

        public func validate() throws(Failure) {
            // Linux names: 32 bytes (useradd); a service is a file name in /etc/pam.d.
            guard !user.isEmpty, user.utf8.count <= 32 else {
                throw Failure(.invalidParameter, "a PAM user name has 1 to 32 bytes")
            }
            guard !service.isEmpty, service.utf8.count <= 64, !service.contains("/") else {
                throw Failure(.invalidParameter, "a PAM service is a name of 1 to 64 bytes without \"/\"")
            }
            guard (tty?.utf8.count ?? 0) <= 256, (remoteHost?.utf8.count ?? 0) <= 256 else {
                throw Failure(.invalidParameter, "PAM_TTY and PAM_RHOST have at most 256 bytes")
            }
            guard reuse.isFinite, reuse >= 0, reuse <= Self.maximumReuse else {
                throw Failure(.invalidParameter, "reuse is 0 to \(Int(Self.maximumReuse)) seconds")
            }
            if let timeout, !(timeout.isFinite && timeout >= 1 && timeout <= 3600) {
                throw Failure(.invalidParameter, "timeout is 1 to 3600 seconds")
            }
        }
    }
}

/// `password=` on the PAM line.
public enum PAMPasswordMode: String, Codable, Sendable, Equatable, CaseIterable {
    /// The finger or the login password, whichever comes first (the default).
    case login
    /// The finger only; without it, the next module asks.
    case none
}

/// How a PAM authentication ended, as the daemon answers the module; the module maps each to one
/// PAM return code (docs/architecture.md, "A PAM module": the table), and nothing but `success`
/// is ever `PAM_SUCCESS` or `PAM_IGNORE`.
public enum PAMOutcome: String, Codable, Sendable, Equatable, CaseIterable {
    /// A matching finger or the right login password: PAM_SUCCESS.
    case success
    /// A wrong finger or password, attempts left: PAM_AUTH_ERR.
    case wrong
    /// The finger is locked out and the password delayed or refused, or the password's attempts
    /// used up (a durable lockout, kept by the daemon): PAM_MAXTRIES, which the shipped stack line
    /// makes final (`maxtries=die`) so the next module cannot route around it.
    case locked
    /// The person cancelled (Esc, Ctrl-C): PAM_AUTH_ERR.
    case cancelled
    /// Nothing this module offers here (no daemon, no enrolment, remote, the finger locked with
    /// `password=none`, a timeout): PAM_AUTHINFO_UNAVAIL, so the next module asks.
    case unavailable
    /// The peer may not ask for this user: PAM_PERM_DENIED.
    case refused
}

/// The daemon's one answer to `pamAuthenticate`: the outcome and a line the module may show.
public struct PAMAuthenticationReply: Codable, Sendable, Equatable {
    public var outcome: PAMOutcome
    public var message: String
    public init(outcome: PAMOutcome, message: String) {
        self.outcome = outcome
        self.message = message
    }
}
