import EnclaveProtocol

/// Sends replies on one connection; several evaluations may answer at once.
protocol ReplySink: Sendable {
    func send(_ envelope: ReplyEnvelope) async
}
