import EnclaveCore
import EnclaveProtocol

/// Keychain items and keys: each call runs on its own, on its context. It reads top-down: the
/// user's session reads the call and answers it, or names the proofs it needs; the connection
/// proves them on the call's context (`prove`); the session opens what was accepted. Their
/// arguments were checked with the request (`KeychainRequest.validate`, `KeyRequest.validate`).
extension ConnectionHandler {
    func startKeychain(
        id: UInt64,
        _ operation: KeychainOperation,
        _ k: KeychainRequest,
        session: UserSession
    ) throws -> Job? {
        try start(on: k.context) { end in
            let reply: KeychainReply
            switch await session.keychainStart(operation, k, app: self.peer.identity) {
            case .answered(let answered): reply = answered
            case .proving(let pending):
                reply = await self.proveAndFinish(id: id, k, pending, session: session, end: end)
            }
            self.answerKeychain(id: id, operation, reply)
        }
    }

    /// A read is answered where it arrives when it needs nobody (most reads): no task of its own,
    /// nothing tracked on its context. One that must prove a step goes on as `startKeychain`'s
    /// requests do, as a task on its context, so that the connection reads on while it waits.
    func copyKeychain(id: UInt64, _ k: KeychainRequest, session: UserSession) async throws -> Handling {
        switch await session.keychainStart(.copy, k, app: peer.identity) {
        case .answered(let reply):
            recordKeychain(.copy, reply)
            return .reply(.keychain(reply))
        case .proving(let pending):
            return .started(
                try start(on: k.context) { end in
                    let reply = await self.proveAndFinish(id: id, k, pending, session: session, end: end)
                    self.answerKeychain(id: id, .copy, reply)
                }
            )
        }
    }

    private func answerKeychain(id: UInt64, _ operation: KeychainOperation, _ reply: KeychainReply) {
        recordKeychain(operation, reply)
        sink.send(ReplyEnvelope(id: id, reply: .keychain(reply)))
    }

    /// Changes and failures are recorded; a successful read is recorded through its authorization
    /// steps (keychain.authorize), and a read that needed none is not: that keeps reads free of a
    /// durable write.
    private func recordKeychain(_ operation: KeychainOperation, _ reply: KeychainReply) {
        if operation != .copy || reply.status != .success {
            audit("keychain.\(operation.rawValue)", result: reply.status == .success ? "ok" : "status \(reply.status)")
        }
    }

    private func proveAndFinish(
        id: UInt64,
        _ k: KeychainRequest,
        _ pending: PendingKeychain,
        session: UserSession,
        end: RequestEnd
    ) async -> KeychainReply {
        let noUI = k.interactionNotAllowed || (k.authenticationUI?.forbidsPrompt ?? false)
        let request = ProofRequest(
            id: id,
            context: k.context,
            reason: k.reason ?? "Access a keychain item",
            noUI: noUI,
            onTerminal: k.onTerminal,
            audited: "keychain.authorize",
            end: end
        )
        do throws(AccessDenial) {
            let (accepted, waited) = try await prove(pending.proofs, request, session: session)
            return await session.keychainFinish(pending, accepted: accepted, waited: waited)
        } catch {
            let failure = KeychainFailure(error)
            return KeychainReply(status: failure.status, message: failure.message)
        }
    }

    func startKeyOperation(id: UInt64, _ k: KeyRequest, session: UserSession) throws -> Job? {
        let sink = self.sink
        return try start(on: k.context) { end in
            let reply = await self.keyOperation(id: id, k, session: session, end: end)
            if k.operation != .open {
                self.audit("key.\(k.operation.rawValue)", result: reply.problem?.rawValue ?? "ok")
            }
            sink.send(ReplyEnvelope(id: id, reply: .key(reply)))
        }
    }

    private func keyOperation(id: UInt64, _ k: KeyRequest, session: UserSession, end: RequestEnd) async -> KeyReply {
        switch await session.keyStart(k, app: peer.identity) {
        case .answered(let reply):
            return reply
        case .proving(let pending):
            let request = ProofRequest(
                id: id,
                context: k.context,
                reason: k.reason ?? "Use a Secure Enclave key",
                noUI: k.interactionNotAllowed,
                onTerminal: k.onTerminal,
                audited: "key.authorize",
                end: end
            )
            do throws(AccessDenial) {
                let (_, waited) = try await prove(pending.proofs, request, session: session)
                return await session.keyFinish(pending, waited: waited)
            } catch {
                return KeyReply(error)
            }
        }
    }
}
