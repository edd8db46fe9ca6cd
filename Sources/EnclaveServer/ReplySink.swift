import EnclaveProtocol

/// Sends replies on one connection; several evaluations may answer at once.
protocol ReplySink: Sendable {
    func send(_ envelope: ReplyEnvelope) async
    /// Codes every later reply so (after `hello`'s answer); a sink of values needs no coding.
    func speak(_ encoding: WireEncoding)
}

extension ReplySink {
    func speak(_ encoding: WireEncoding) {}
}
