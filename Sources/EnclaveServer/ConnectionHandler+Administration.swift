import EnclaveCore
import EnclaveProtocol

/// The user's administration. Those with an `AdminPolicy.purpose` need the person
/// (`PersonSecrets`) and run one at a time per connection (`ConnectionStateMachine`); a change is
/// audited.
extension ConnectionHandler {
    func administer(_ envelope: RequestEnvelope, session: UserSession) async throws -> Reply? {
        let request = envelope.request
        switch request {
        case .setPasscode:
            let new = try await secrets(for: request, session: session).newPasscode()
            try await audited("passcode.set") { try await session.setPasscode(current: nil, new: new) }
        case .changePasscode:
            let (current, new) = try await secrets(for: request, session: session).currentAndNewPasscode()
            try await audited("passcode.change") { try await session.setPasscode(current: current, new: new) }
        case .removePasscode:
            let current = try await secrets(for: request, session: session).passcode()
            try await audited("passcode.remove") { try await session.removePasscode(current: current) }
        case .enroll(let a):
            let passcode = try await secrets(for: request, session: session).passcode()
            try await enroll(a.name, passcode: passcode, requestID: envelope.id, session: session)
        case .unenroll(let a):
            let passcode = try await secrets(for: request, session: session).passcode()
            try await audited("unenroll") { try await session.unenroll(passcode: passcode, name: a.name) }
        case .audit(let a):
            let limit = min(max(a.limit, 1), 500)
            switch AdminPolicy.auditScope(caller: peer.uid, mode: daemon.config.mode, everyApp: a.everyApp) {
            case .everyUser:
                return .audit(try daemon.auditLog.read(uid: nil, app: nil, limit: limit))
            case .everyAppOfCaller:
                try await session.confirmPasscode(try await secrets(for: request, session: session).passcode())
                return .audit(try daemon.auditLog.read(uid: peer.uid, app: nil, limit: limit))
            case .callingApp:
                return .audit(try daemon.auditLog.read(uid: peer.uid, app: peer.app, limit: limit))
            }
        case .resetPasscodeLockout(let a):
            let target = try await administered(a.uid)
            switch try AdminPolicy.passcodeLockoutReset(caller: peer.uid, mode: daemon.config.mode) {
            case .administrator:
                try await audited("admin.resetPasscodeLockout") { try await target.resetPasscodeLockout() }
            case .loginPassword:
                let password = try await secrets(for: request, session: target).loginPassword()
                try await audited("passcode.resetByLoginPassword") {
                    try await target.resetPasscodeLockout(loginPassword: password)
                }
            }
        case .remoteLock(let a):
            let target = try await administered(a.uid)
            try await audited("admin.remoteLock") { try await target.remoteLock() }
        case .configureAccessGroup(let a):
            let passcode = try await secrets(for: request, session: session).passcode()
            try await audited("keychain.group") {
                try await session.configureAccessGroup(passcode: passcode, name: a.name, apps: a.apps)
            }
        case .accessGroups:
            return .accessGroups(
                try await session.accessGroups(passcode: try await secrets(for: request, session: session).passcode())
            )
        case .enrolments:
            return .enrolments(
                try await session.enrolments(passcode: try await secrets(for: request, session: session).passcode())
            )
        case .keychainList:
            let passcode = try await secrets(for: request, session: session).passcode()
            return .keychainListing(
                try await audited("keychain.list") { try await session.keychainList(passcode: passcode) }
            )
        case .keychainRemove(let a):
            let passcode = try await secrets(for: request, session: session).passcode()
            try await audited("keychain.remove") {
                try await session.keychainRemove(passcode: passcode, persistentRef: a.persistentRef)
            }
        default:
            preconditionFailure("\(request.operation) is not administration")
        }
        return .ok
    }

    /// A real reader's stages go to the client as they pass, in order, before the final ok.
    private func enroll(_ name: String, passcode: String, requestID id: UInt64, session: UserSession) async throws {
        let (stages, forward) = AsyncStream<EnrolmentProgress>.makeStream()
        let sink = self.sink
        let forwarding = Task {
            for await p in stages { sink.send(ReplyEnvelope(id: id, reply: .enrollProgress(p))) }
        }
        defer { forwarding.cancel() }
        do {
            try await audited("enroll") {
                try await session.enroll(passcode: passcode, name: name, progress: { forward.yield($0) })
            }
        } catch {
            forward.finish()
            await forwarding.value
            throw error
        }
        forward.finish()
        await forwarding.value
    }

    /// Where this request's passcode comes from: the person, on the trusted prompt or through the
    /// pipe the client handed (`PersonSecrets`).
    private func secrets(for request: Request, session: UserSession) -> PersonSecrets {
        PersonSecrets(
            descriptors: handed,
            app: peer.app,
            purpose: AdminPolicy.purpose(of: request) ?? "\(request.operation.rawValue)",
            session: session,
            whenClosed: { [self] in whenClosed($0) },
            agent: daemon.promptAgents.agent(serving: peer),
            pipeAllowed: AdminPolicy.pipeGivesThePasscode(caller: peer.uid, allowed: daemon.config.administrationPipe),
            terminalHolders: daemon.config.terminalHolders,
            holderReader: daemon.peerHelper.map { .helper($0) } ?? .thisProcess,
            noHandoff: daemon.handoff.refusal(for: peer.uid)
        )
    }

    private func administered(_ uid: UInt32?) async throws -> UserSession {
        try daemon.session(
            for: try AdminPolicy.target(uid, caller: peer.uid, mode: daemon.config.mode, servedUser: daemon.servedUser)
        )
    }

    /// Runs `body`, auditing success or the failure code; never records arguments.
    private func audited<T>(_ operation: String, _ body: () async throws -> T) async throws -> T {
        do {
            let value = try await body()
            audit(operation, result: "ok")
            return value
        } catch {
            if let failure = DaemonError.failure(for: error) { audit(operation, result: failure.code.rawValue) }
            throw error
        }
    }
}
