import EnclaveCore
import EnclaveProtocol

/// Keychain items and keys: each call runs on its own, on its context, so that an access control
/// that needs the person can prove its steps there. Their arguments were checked with the request
/// (`KeychainRequest.validate`, `KeyRequest.validate`).
extension ConnectionHandler {
    func startKeyOperation(id: UInt64, _ k: KeyRequest, session: UserSession) throws {
        let sink = self.sink
        try start(on: k.context) {
            let reply = await session.keyOperation(k, app: self.peer.identity,
                                                   authorize: self.authorizer(requestID: id, context: k.context, onTerminal: k.onTerminal,
                                                                              audited: "key.authorize", session: session))
            if k.operation != .open { self.audit("key.\(k.operation.rawValue)", result: reply.problem?.rawValue ?? "ok") }
            await sink.send(ReplyEnvelope(id: id, reply: .key(reply)))
        }
    }

    func startKeychain(id: UInt64, _ operation: KeychainOperation, _ k: KeychainRequest, session: UserSession) throws {
        let sink = self.sink
        try start(on: k.context) {
            let reply = await session.keychain(operation, k, app: self.peer.identity,
                                               authorize: self.authorizer(requestID: id, context: k.context, onTerminal: k.onTerminal,
                                                                          audited: "keychain.authorize", session: session))
            // Changes and failures are recorded; a successful read is recorded through its
            // authorization steps (keychain.authorize), and a read that needed none is not: that
            // keeps reads free of a durable write.
            if operation != .copy || reply.status != .success {
                self.audit("keychain.\(operation.rawValue)", result: reply.status == .success ? "ok" : "status \(reply.status)")
            }
            await sink.send(ReplyEnvelope(id: id, reply: .keychain(reply)))
        }
    }
}
