import EnclaveProtocol

/// What the scripted person will do next, in order: touches for the sensor, presses and typed
/// passcodes for the prompt (`simulate` requests, the testing kit). The running evaluation takes
/// them one at a time; a touch goes to the simulated sensor when it is armed, anything else to
/// the evaluation, which discards what does not apply at that moment.
public struct PersonScript: Sendable, Equatable {
    public private(set) var events: [SimulatedEvent] = []

    public init() {}

    public var isEmpty: Bool { events.isEmpty }
    public var count: Int { events.count }

    /// Queues `new` behind what is waiting, or refuses all of it: simulation off (and why, when a
    /// real reader is the reason), more than `WireLimits.maxQueuedEvents` waiting, a passcode event
    /// without a passcode of 1 to `WireLimits.maxPasscodeBytes` bytes.
    public mutating func append(_ new: [SimulatedEvent], simulationEnabled: Bool, realSensor: Bool) throws {
        guard simulationEnabled else {
            if realSensor {
                throw Failure(
                    .simulationDisabled,
                    "this daemon uses a real fingerprint reader: scripted touches and passcodes are refused unless the administrator allows simulation (allow-simulation = yes, --allow-simulation)"
                )
            }
            throw Failure(.simulationDisabled, "this daemon does not accept simulated events")
        }
        guard events.count + new.count <= WireLimits.maxQueuedEvents else {
            throw Failure(.invalidParameter, "at most \(WireLimits.maxQueuedEvents) events may wait in the queue")
        }
        for e in new where e.kind == .passcode {
            guard let p = e.passcode, !p.isEmpty, p.utf8.count <= WireLimits.maxPasscodeBytes else {
                throw Failure(
                    .invalidParameter,
                    "a passcode event needs a passcode of 1 to \(WireLimits.maxPasscodeBytes) bytes"
                )
            }
        }
        events.append(contentsOf: new)
    }

    /// The next event, removed from the script.
    public mutating func next() -> SimulatedEvent? { events.isEmpty ? nil : events.removeFirst() }

    public mutating func clear() { events.removeAll() }
}

extension SimulatedEvent {
    /// What a sensor reads when this event is a touch (a finger or a face); nil for the prompt's events.
    public var touch: SensorReading? {
        switch kind {
        case .match: return .match
        case .nomatch: return .noMatch
        case .cancel, .fallback, .retry, .passcode: return nil
        }
    }
}
