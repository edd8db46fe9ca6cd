import EnclaveCore

/// What runs on a context: the evaluation's input channel and the request's stop signal.
struct RunningRequest: Sendable {
    var inputs: AsyncStream<SessionInput>.Continuation?
    var stop: AsyncStream<Never>.Continuation?

    /// Ends it: an evaluation reads `input` (appCancel when its client went or invalidated the
    /// context, systemCancel when the daemon stops); a request waiting for the user's prompt, or
    /// for anything else, is cancelled.
    func end(_ input: EvaluationMachine.Input = .appCancel) {
        inputs?.yield(.machine(input))
        stop?.finish()
    }
}
