import EnclaveProtocol

/// The rules of a PAM authentication (issue 32, first step: the module and its request build on
/// these): who may ask the daemon to authenticate whom, and whether the person may use a finger,
/// the login password, both at once, or neither. Pure: the shell gathers the kernel's and logind's
/// facts about the requesting process and performs the decision; the module maps the outcome to a
/// PAM return code (`PAMOutcome`).
///
/// Our rules, from fprintd's and the anchors' lessons (docs/architecture.md, "A PAM module"):
/// - Only root (sudo, su, login, polkit's helper) or the uid of PAM_USER itself (a lock screen)
///   may ask, and only for an existing local user whose own session it is: anything else would make
///   the daemon an oracle for other users' fingers and let anyone burn their counters (`su alice`
///   from bob's session runs as root too).
/// - The service, tty and remote host are believed from root alone (an unprivileged process can
///   `pam_start("sudo", …)` itself); a claim can only ever take the finger away, never grant it.
/// - Nothing at all unless the requesting process's logind session is local and on a seat and no
///   remote host is named: "unavailable", so the next module (pam_unix) asks at once. Never the
///   daemon's counted password there: sshd's pre-authentication runs as root, and a network client
///   could otherwise burn the user's counter into a lockout that `maxtries=die` makes final.
/// - The daemon's counted login password only for root's requests (sudo, su, polkit's helper), only
///   where the daemon can check it and draws its prompt where it can be typed; a user's own process
///   (a lock screen) gets the finger alone, its password going to the next module, so no process of
///   the user's can burn that counter either.
/// - A process of the user's service manager (a desktop's polkit agent or terminal, in no session
///   of its own) stands in the user's display session (`LoginSession.standing`), served only where
///   the user's prompt agent, or a terminal emulator of that service manager, draws the prompt on
///   the seat (`TerminalHolders.drawnOnTheSeat`): anything of the user's may run there.
/// - No finger with the lid closed over the only reader, nor where the request's terminal is held
///   by a terminal multiplexer (tmux, screen) with a client attached from elsewhere (an SSH
///   session, or none at a seat): the person typing may not be at this machine. The password
///   alone, or unavailable.
public enum PAMAuthenticationRules {
    /// What the module asks with (PAM's items as the module read them).
    public struct Request: Equatable, Sendable {
        public var user: String
        public var service: String
        public var tty: String?
        public var remoteHost: String?
        public var password: PasswordMode

        public init(user: String, service: String, tty: String?, remoteHost: String?, password: PasswordMode) {
            self.user = user
            self.service = service
            self.tty = tty
            self.remoteHost = remoteHost
            self.password = password
        }
    }

    public typealias PasswordMode = PAMPasswordMode

    /// What the daemon knows of the request, from the kernel and logind, not from the request.
    public struct Facts: Equatable, Sendable {
        /// The connection's peer uid (SO_PEERCRED).
        public var peerUID: UInt32
        /// PAM_USER's uid in the machine's user database; nil: no such local user.
        public var userUID: UInt32?
        /// The requesting process's logind session: whether it is remote (nil: in no session).
        public var sessionRemote: Bool?
        /// That session's seat (nil: none, as for an SSH or a cron session).
        public var seat: String?
        /// The names this machine answers to (its host name, localhost, the loopback addresses):
        /// sudo names the local host as PAM_RHOST.
        public var localHostNames: Set<String>
        /// logind's LidClosed, and whether the built-in reader is the only one.
        public var lidClosed: Bool
        public var onlyBuiltInReader: Bool
        /// Whose session it is (logind's `UID=`): the person at the seat. nil: not stated.
        public var sessionUID: UInt32?
        /// Whether the daemon can check a login password at all (root, or `/etc/shadow` readable:
        /// pam_unix's helper checks only the caller's own password). Without it a right password
        /// would be counted as wrong.
        public var passwordCheckable: Bool
        /// Whether the daemon draws the prompt somewhere a password can be typed: the terminal the
        /// module handed, or the user's prompt agent on the seat. Else only a finger can answer.
        public var promptShown: Bool
        /// Where the people sit who see the request's terminal through a terminal multiplexer
        /// (tmux, screen; `TerminalMultiplexerClients`): each client attached, by the session it
        /// stands in. Empty: no multiplexer above the request.
        public var multiplexerClients: [Place]
        /// The session is the user's display session, stood in by a process of the user's service
        /// manager (`LoginSession.standing`), not the requester's own.
        public var throughServiceManager: Bool
        /// The prompt is drawn in the user's prompt agent's window on the seat.
        public var drawnByAgent: Bool
        /// The handed terminal is drawn on the seat by an emulator of the same service manager
        /// (`TerminalHolders.drawnOnTheSeat`).
        public var terminalDrawnOnTheSeat: Bool

        public init(
            peerUID: UInt32,
            userUID: UInt32?,
            sessionRemote: Bool?,
            seat: String?,
            localHostNames: Set<String> = ["localhost", "127.0.0.1", "::1"],
            lidClosed: Bool = false,
            onlyBuiltInReader: Bool = false,
            sessionUID: UInt32? = nil,
            passwordCheckable: Bool = false,
            promptShown: Bool = false,
            multiplexerClients: [Place] = [],
            throughServiceManager: Bool = false,
            drawnByAgent: Bool = false,
            terminalDrawnOnTheSeat: Bool = false
        ) {
            self.peerUID = peerUID
            self.userUID = userUID
            self.sessionRemote = sessionRemote
            self.seat = seat
            self.localHostNames = localHostNames
            self.lidClosed = lidClosed
            self.onlyBuiltInReader = onlyBuiltInReader
            self.sessionUID = sessionUID
            self.passwordCheckable = passwordCheckable
            self.promptShown = promptShown
            self.multiplexerClients = multiplexerClients
            self.throughServiceManager = throughServiceManager
            self.drawnByAgent = drawnByAgent
            self.terminalDrawnOnTheSeat = terminalDrawnOnTheSeat
        }
    }

    /// A session's place, as logind states it: remote or not (nil: in no session), and its seat.
    public struct Place: Equatable, Sendable {
        public var remote: Bool?
        public var seat: String?
        public init(remote: Bool?, seat: String?) {
            self.remote = remote
            self.seat = seat
        }
        /// Where no one can be seen: a process whose place could not be read.
        public static let unknown = Place(remote: nil, seat: nil)
        var isAtASeat: Bool { remote == false && !(seat ?? "").isEmpty }
    }

    public enum Decision: Equatable, Sendable {
        /// Not this peer's to ask (logged, answered as `PAMOutcome.refused`).
        case refuse(String)
        /// The finger or the login password, whichever comes first.
        case fingerOrPassword
        /// The finger only (`password=none`).
        case fingerOnly
        /// The login password only (root's requests): no finger here, for the reason given.
        case passwordOnly(String)
        /// Nothing this module offers here, for the reason given: the next module asks.
        case unavailable(String)

        /// Whether a finger at the reader may answer.
        public var offersFinger: Bool {
            switch self {
            case .fingerOrPassword, .fingerOnly: true
            case .refuse, .passwordOnly, .unavailable: false
            }
        }
    }

    public static func decide(_ request: Request, _ facts: Facts) -> Decision {
        let user = Printable.field(String(request.user.prefix(32)))
        // Where first: sshd's pre-authentication (root, no session) learns nothing of which users
        // exist, and is answered as fast for every name.
        if let why = whyNotHere(request, facts) { return .unavailable(why) }
        guard let userUID = facts.userUID else { return .unavailable("no local user of that name") }
        guard facts.peerUID == 0 || facts.peerUID == userUID else {
            return .refuse("uid \(facts.peerUID) may not ask to authenticate \(user)")
        }
        // `su alice` or polkit's helper in bob's session: bob is at the reader, not alice.
        guard facts.sessionUID == userUID else {
            return .unavailable("the session at the seat is another user's")
        }
        // Anything of the user's, local or not (a job scheduled over SSH, a web terminal), may run
        // in the service manager: only the agent's window, or a terminal emulator's, on the seat
        // shows the person who asks.
        guard !facts.throughServiceManager || facts.drawnByAgent || facts.terminalDrawnOnTheSeat else {
            return .unavailable(
                "a process of the user's service manager, with no prompt agent or terminal on the seat to show who asks"
            )
        }
        let password =
            request.password == .login && facts.peerUID == 0 && facts.passwordCheckable && facts.promptShown
        if let why = whyNoFinger(facts) { return password ? .passwordOnly(why) : .unavailable(why) }
        return password ? .fingerOrPassword : .fingerOnly
    }

    /// Why a finger at this machine's reader cannot answer though the request was made here.
    static func whyNoFinger(_ facts: Facts) -> String? {
        if facts.lidClosed && facts.onlyBuiltInReader { return "the lid is closed over the only reader" }
        if let far = facts.multiplexerClients.first(where: { !$0.isAtASeat }) {
            return far.remote == true
                ? "the terminal is also attached from a remote session (tmux or screen over SSH)"
                : "the terminal is also attached from outside a session at a seat (tmux or screen)"
        }
        return nil
    }

    /// Why nothing is offered: no one at this machine's reader made the request; nil when someone may have.
    public static func whyNotHere(_ request: Request, _ facts: Facts) -> String? {
        if let host = request.remoteHost.map(hostName), !host.isEmpty,
            !facts.localHostNames.map(hostName).contains(host)
        {
            return "the request comes from another host (\(Printable.field(String(host.prefix(64)))))"
        }
        guard facts.sessionRemote == false else {
            return facts.sessionRemote == nil ? "the requesting process is in no login session" : "a remote session"
        }
        guard let seat = facts.seat, !seat.isEmpty else {
            return "the session has no seat (no one at this machine's reader)"
        }
        return nil
    }

    /// A host name as compared: case and a final dot do not matter.
    static func hostName(_ name: String) -> String {
        let lowered = name.lowercased()
        return lowered.hasSuffix(".") ? String(lowered.dropLast()) : lowered
    }
}

extension PAMAuthenticationRules {
    /// How the evaluation runs for a decision that offers something: its policy, and whether the
    /// password alone is asked.
    public static func evaluation(for decision: Decision) -> (policy: PolicyValue, passwordOnly: Bool)? {
        switch decision {
        case .fingerOrPassword: return (.deviceOwnerAuthentication, false)
        case .fingerOnly: return (.deviceOwnerAuthenticationWithBiometrics, false)
        case .passwordOnly: return (.deviceOwnerAuthentication, true)
        case .refuse, .unavailable: return nil
        }
    }

    /// Why nothing can pass before a prompt opens: the finger is refused (locked out, or not
    /// offered) and the password may not be checked now. A durable lockout is `locked`, never
    /// `unavailable`: the next module must not route around it. With the finger alone, a refused
    /// finger is only unavailable — the password was never ours to count.
    /// `stateRefusal`: why the daemon checks nothing for anyone (a rollback refusal) — its own
    /// trouble, never a lockout. `fingerReady`: a reader and an enrolled finger; without them the
    /// module steps aside, the lid closed or not.
    public static func before(
        _ decision: Decision,
        biometryRefused: Bool,
        password gate: PasscodeGate,
        fingerReady: Bool = true,
        stateRefusal: String? = nil
    ) -> (PAMOutcome, String)? {
        switch decision {
        case .fingerOnly, .fingerOrPassword, .passwordOnly:
            if let stateRefusal { return (.unavailable, stateRefusal) }
            guard fingerReady else {
                return (.unavailable, "no finger is enrolled on a reader: the password is asked next")
            }
        case .refuse, .unavailable: break
        }
        switch decision {
        case .fingerOnly:
            return biometryRefused ? (.unavailable, "the finger is locked out: the password is asked next") : nil
        case .fingerOrPassword, .passwordOnly:
            let fingerRefused = biometryRefused || decision != .fingerOrPassword
            guard fingerRefused else { return nil }
            switch gate {
            case .open: return nil
            case .wait(let seconds):
                return (.locked, "password entry is delayed; try again in \(Int(seconds.rounded(.up))) s")
            case .disabled:
                return (.locked, "password entry is disabled until an administrator resets it")
            }
        case .refuse(let why): return (.refused, why)
        case .unavailable(let why): return (.unavailable, why)
        }
    }

    /// How long the prompt may stay open, from the request's arrival: the module's `timeout=`,
    /// else 60 s where the password is offered and 10 s where only a finger can answer
    /// (pam_fprintd's Debian default), and never past the daemon's own prompt timeout.
    public static func promptTimeout(requested: Double?, fingerOnly: Bool, daemonLimit: Double) -> Double {
        min(requested ?? (fingerOnly ? 10 : 60), daemonLimit)
    }

    /// The evaluation's end as the module's outcome. With the finger alone, a lockout only hands
    /// over to the next module; where the password was offered, it is final.
    public static func outcome(of result: EvaluationMachine.Outcome, fingerOnly: Bool) -> PAMOutcome {
        guard case .failure(let code, _) = result else { return .success }
        switch code {
        case .userCancel, .userFallback: return .cancelled
        case .authenticationFailed: return .wrong
        case .biometryLockout: return fingerOnly ? .unavailable : .locked
        default: return .unavailable
        }
    }
}
