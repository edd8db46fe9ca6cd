import EnclaveCore

/// What can reach a running evaluation.
enum SessionInput: Sendable {
    case machine(EvaluationMachine.Input)
    /// Scripted events were queued; the evaluation takes them in order.
    case simulatedAvailable
    /// A simulation key on a prompt: a touch for the simulated sensor, read if it is armed.
    case touch(SensorReading)
    /// What capture number `capture` read (`EvaluationRunner.arm`); a capture that was replaced or
    /// disarmed speaks for nothing.
    case sensor(SensorReading, capture: UInt64)
    case sensorFailed(String, capture: UInt64)
    /// The sensor could not read the scan ("finger not centred"): shown, not counted.
    case sensorRetry(String, capture: UInt64)
}
