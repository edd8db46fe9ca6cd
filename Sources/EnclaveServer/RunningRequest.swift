import EnclaveCore

/// What runs on a context: the evaluation's input channel, and the request's end.
struct RunningRequest: Sendable {
    var inputs: AsyncStream<SessionInput>.Continuation?
    var ending: RequestEnd?

    /// Ends it: an evaluation reads `input` (appCancel when its client went or invalidated the
    /// context, systemCancel when the daemon stops); a request waiting for the user's prompt
    /// leaves the line.
    func end(_ input: EvaluationMachine.Input = .appCancel) {
        inputs?.yield(.machine(input))
        ending?.end()
    }
}
