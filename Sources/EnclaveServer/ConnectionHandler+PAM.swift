import EnclaveCore
import EnclaveProtocol
import Foundation

/// What makes an evaluation a PAM authentication's: the name its prompt and reuse window go by,
/// what a typed password is, and its audit line.
struct PAMEvaluationTerms: Sendable {
    var app: String
    var secret: EvaluationMachine.Secret
    /// The agent that draws the prompt when no terminal was handed: the authenticated user's, in
    /// the requesting process's session, for root's requests (polkit's helper started by the
    /// user's agent); nil: the handed terminal, or headless. Resolved once: the decision to offer
    /// the password rests on it.
    var agent: PromptAgent?
    /// How long the request may wait for the prompt and keep it open, from its arrival
    /// (`PAMAuthenticationRules.promptTimeout`).
    var promptTimeout: Double
    var audit: @Sendable (EvaluationMachine.Outcome) -> AuditEntry
}

/// `pam_laenclave.so`'s request: the facts gathered (`PAMFacts`), the rules' decision
/// (`PAMAuthenticationRules`), then the same evaluation an app's `evaluatePolicy` runs, on the
/// user's session, with its lockout and counters, answered with one `pamAuthenticated`.
extension ConnectionHandler {
    /// The connection's context a PAM authentication runs on: an id no request can name (ids have
    /// 1 to 64 bytes), so nothing on the connection can use what it proved.
    static let pamContext = ""

    func startPAMAuthentication(id: UInt64, _ request: Request.PAMAuthenticate) throws -> Job? {
        guard daemon.config.mode == .system else {
            throw Failure(.notPermitted, "PAM authentications are served by the system daemon")
        }
        return try start(on: Self.pamContext) { end in
            let reply = await self.authenticateForPAM(id: id, request, end: end)
            self.sink.send(ReplyEnvelope(id: id, reply: .pamAuthenticated(reply)))
        }
    }

    private func authenticateForPAM(
        id: UInt64,
        _ request: Request.PAMAuthenticate,
        end: RequestEnd
    ) async -> PAMAuthenticationReply {
        let rulesRequest = PAMAuthenticationRules.Request(
            user: request.user,
            service: request.service,
            tty: request.tty,
            remoteHost: request.remoteHost,
            password: request.password
        )
        let gathered = await PAMFacts.read(
            rulesRequest,
            onTerminal: request.onTerminal,
            peer: peer,
            config: daemon.config,
            realSensor: daemon.sensor.map { !$0.info.simulated } ?? false
        )
        var facts = gathered.facts
        let standingSession = gathered.session
        // Without a terminal, root's request (polkit's helper) is drawn by the user's prompt agent
        // on the session, if one serves it; so is one from the user's service manager even with a
        // terminal (sudo in GNOME Terminal): a terminal there may be hidden by anything of the
        // user's, the agent's window is on the seat. A user's own process (a lock screen, whose
        // session is hidden behind it) gets no window: the finger alone, told by the module.
        let agentFirst = !request.onTerminal || facts.throughServiceManager
        let agent =
            !agentFirst || peer.uid != 0
            ? nil
            : facts.userUID.flatMap { uid in
                // The agent serves the session it runs in: found as the helper's own session
                // says, then by the session the helper stands in (one of the user's service
                // manager: a desktop's polkit agent started it).
                daemon.promptAgents.agent(for: PromptSeat(uid: uid, session: peer.session))
                    ?? daemon.promptAgents.agent(for: PromptSeat(uid: uid, session: standingSession))
            }
        facts.promptShown = request.onTerminal || agent != nil
        facts.drawnByAgent = agent != nil
        if facts.throughServiceManager && request.onTerminal && agent == nil {
            let (pid, listed) = (peer.pid, daemon.config.terminalHolders)
            let reader: PtyMasterHolders.Reader = daemon.peerHelper.map { .helper($0) } ?? .thisProcess
            facts.terminalDrawnOnTheSeat =
                (try? await BlockingWork.waiting {
                    PAMFacts.terminalDrawnOnTheSeat(of: pid, reader: reader, listed: listed)
                }) ?? false
        }
        var decision = PAMAuthenticationRules.decide(rulesRequest, facts)
        // Who else looks at the terminal is read only where a finger would answer: a /proc walk.
        if decision.offersFinger {
            facts.multiplexerClients = await PAMFacts.multiplexerClients(
                of: peer.pid,
                logind: daemon.config.logindDirectory
            )
            decision = PAMAuthenticationRules.decide(rulesRequest, facts)
        }
        let origin = Self.origin(request, session: standingSession, peerUID: peer.uid)
        func answer(_ outcome: PAMOutcome, _ message: String) -> PAMAuthenticationReply {
            // A refusal is the asker's entry, not the user's it named: no one fills another's log.
            let target = outcome == .refused ? peer.uid : facts.userUID ?? peer.uid
            auditPAM(target: target, origin: origin, outcome: outcome, detail: "none: \(message)")
            if outcome == .refused {
                logger.warning("PAM authentication refused", metadata: ["origin": "\(origin)", "why": "\(message)"])
            }
            return PAMAuthenticationReply(outcome: outcome, message: message)
        }
        guard let userUID = facts.userUID, let (policy, passwordOnly) = PAMAuthenticationRules.evaluation(for: decision)
        else {
            if case .unavailable(let why) = decision {
                // Stepped aside before anything was offered (not at this seat, no such user, another
                // user's session): logged, not audited — sshd passes every network attempt here,
                // and would otherwise rotate a user's audit entries out.
                logger.debug("PAM authentication not offered", metadata: ["origin": "\(origin)", "why": "\(why)"])
                return PAMAuthenticationReply(outcome: .unavailable, message: why)
            }
            let (outcome, why) =
                PAMAuthenticationRules.before(decision, biometryRefused: false, password: .open)
                ?? (.unavailable, "nothing is offered")
            return answer(outcome, why)
        }
        let session: UserSession
        let standing: UserSession.PAMStanding
        do {
            session = try daemon.session(for: userUID)
            standing = try await session.pamStanding()
        } catch {
            return answer(.unavailable, "the enclave could not read the user's state: \(error)")
        }
        if let (outcome, why) = PAMAuthenticationRules.before(
            decision,
            biometryRefused: standing.biometryRefused,
            password: standing.password,
            fingerReady: standing.fingerReady,
            stateRefusal: standing.refusal
        ) {
            return answer(outcome, why)
        }
        let fingerOnly = policy == .deviceOwnerAuthenticationWithBiometrics
        let label = Self.promptLabel(request, peer: peer, session: standingSession, trusted: peer.uid == 0)
        // A terminal handed is where the person looks (sudo, su): the prompt goes there, never to
        // a window elsewhere on the seat — but for a process of the user's service manager, whose
        // terminal may be hidden, the agent's window comes first (`agent` above). Where only a
        // finger can answer, the wait is short.
        let terms = PAMEvaluationTerms(
            app: label,
            secret: standing.secret,
            agent: agent,
            promptTimeout: PAMAuthenticationRules.promptTimeout(
                requested: request.timeout,
                fingerOnly: fingerOnly,
                daemonLimit: daemon.config.promptTimeout
            )
        ) { [self] outcome in
            pamAuditEntry(
                target: userUID,
                origin: origin,
                outcome: PAMAuthenticationRules.outcome(of: outcome, fingerOnly: fingerOnly),
                detail: Self.pamDetail(outcome)
            )
        }
        let report = await runEvaluation(
            requestID: id,
            context: Self.pamContext,
            policy: policy,
            passcodeOnly: passwordOnly,
            options: EvaluationOptions(
                reason: "\(request.service) asks to authenticate \(request.user)",
                fallbackTitle: "",
                reuseDuration: request.reuse,
                onTerminal: request.onTerminal
            ),
            session: session,
            audited: "pamAuthenticate",
            end: end,
            pam: terms
        )
        var outcome = PAMAuthenticationRules.outcome(of: report.outcome, fingerOnly: fingerOnly)
        // A state refused while the request waited (a rollback seen meanwhile) is the daemon's
        // trouble, never a lockout.
        if outcome == .locked, (try? await session.pamStanding())?.refusal != nil { outcome = .unavailable }
        let message = Self.closingLine(report.outcome)
        if !report.audited {
            auditPAM(target: userUID, origin: origin, outcome: outcome, detail: Self.pamDetail(report.outcome))
        }
        return PAMAuthenticationReply(outcome: outcome, message: message)
    }

    /// The request as the audit log and the log say it: what the kernel says first (the peer, its
    /// session), then what the request claims. Each value is percent-encoded but for letters,
    /// digits and `._:/@+-`, and an absent one is empty: no claim can add a field, break the line,
    /// or read as another value.
    static func origin(_ request: Request.PAMAuthenticate, session: String?, peerUID: UInt32) -> String {
        func field(_ value: String?) -> String {
            (value ?? "").addingPercentEncoding(withAllowedCharacters: auditCharacters) ?? ""
        }
        return
            "peer=\(peerUID) session=\(field(session)) service=\(field(request.service)) user=\(field(request.user)) tty=\(field(request.tty)) rhost=\(field(request.remoteHost))"
    }

    private static let auditCharacters = CharacterSet(
        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/@+-"
    )

    /// How an evaluation ended, as a PAM authentication's audit line says it: the code, and for a
    /// failure its message ("systemCancel(-4): The prompt timed out (10 s).").
    static func pamDetail(_ outcome: EvaluationMachine.Outcome) -> String {
        guard case .failure(_, let message) = outcome else { return describe(outcome) }
        return "\(describe(outcome)): \(message)"
    }

    /// What the prompt names as asking, and the key of the reuse window: the service, terminal
    /// and session from root; from the user's own process, its app first (its claims name nothing
    /// on their own).
    static func promptLabel(
        _ request: Request.PAMAuthenticate,
        peer: PeerIdentity,
        session: String?,
        trusted: Bool
    ) -> String {
        var label = "\(Printable.field(String(request.service.prefix(64)))) (PAM)"
        if let tty = request.tty, !tty.isEmpty { label += " · \(Printable.field(String(tty.prefix(64))))" }
        label += " · session \(session ?? "none")"
        return trusted ? label : "\(peer.app): \(label)"
    }

    private func pamAuditEntry(target: UInt32, origin: String, outcome: PAMOutcome, detail: String) -> AuditEntry {
        AuditEntry(
            time: Date(),
            uid: target,
            pid: peer.pid,
            app: origin,
            operation: "pamAuthenticate",
            policy: nil,
            result: "\(outcome.rawValue) (\(detail))"
        )
    }

    private func auditPAM(target: UInt32, origin: String, outcome: PAMOutcome, detail: String) {
        daemon.auditLog.append(pamAuditEntry(target: target, origin: origin, outcome: outcome, detail: detail))
    }
}
