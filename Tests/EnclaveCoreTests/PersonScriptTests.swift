import EnclaveCore
import EnclaveProtocol
import XCTest

final class PersonScriptTests: XCTestCase {
    private func script(_ events: [SimulatedEvent]) throws -> PersonScript {
        var s = PersonScript()
        try s.append(events, simulationEnabled: true, realSensor: false)
        return s
    }

    /// What is refused, and that a refused batch leaves the script as it was.
    func testWhatIsRefused() throws {
        let long = String(repeating: "7", count: WireLimits.maxPasscodeBytes + 1)
        let full = String(repeating: "7", count: WireLimits.maxPasscodeBytes)
        let cases:
            [(String, waiting: Int, [SimulatedEvent], enabled: Bool, real: Bool, FailureCode?, message: String?)] = [
                ("simulation off", 0, [.match], false, false, .simulationDisabled, "does not accept"),
                (
                    "simulation off with a real reader says how to allow it", 0, [.match], false, true,
                    .simulationDisabled, "allow-simulation"
                ),
                (
                    "the whole limit at once", 0, Array(repeating: .match, count: WireLimits.maxQueuedEvents), true,
                    false, nil, nil
                ),
                (
                    "one past the limit at once", 0, Array(repeating: .match, count: WireLimits.maxQueuedEvents + 1),
                    true, false, .invalidParameter, "at most"
                ),
                (
                    "one past the limit with some waiting", WireLimits.maxQueuedEvents, [.cancel], true, false,
                    .invalidParameter, "at most"
                ),
                (
                    "a passcode event without one", 0, [SimulatedEvent(.passcode)], true, false, .invalidParameter,
                    "1 to"
                ),
                ("an empty passcode", 0, [.passcode("")], true, false, .invalidParameter, "1 to"),
                ("a passcode past the limit", 0, [.match, .passcode(long)], true, false, .invalidParameter, "1 to"),
                ("a passcode at the limit", 0, [.passcode(full)], true, false, nil, nil),
                (
                    "a passcode on another kind is not checked", 0, [SimulatedEvent(.cancel, passcode: "")], true,
                    false, nil, nil
                ),
            ]
        for (name, waiting, events, enabled, real, code, message) in cases {
            var s = try script(Array(repeating: .fallback, count: waiting))
            let before = s
            do {
                try s.append(events, simulationEnabled: enabled, realSensor: real)
                XCTAssertNil(code, "\(name): accepted")
                XCTAssertEqual(s.count, waiting + events.count, name)
            } catch let f as Failure {
                XCTAssertEqual(f.code, code, name)
                XCTAssertTrue(f.message.contains(message ?? "\u{0}"), "\(name): \(f.message)")
                XCTAssertEqual(s, before, "\(name): a refused batch queues nothing")
            }
        }
    }

    func testEventsComeOutInTheOrderTheyWentIn() throws {
        var s = try script([.nomatch, .fallback])
        try s.append([.passcode("1234"), .match], simulationEnabled: true, realSensor: false)
        var taken: [SimulatedEvent] = []
        while let e = s.next() { taken.append(e) }
        XCTAssertEqual(taken, [.nomatch, .fallback, .passcode("1234"), .match])
        XCTAssertTrue(s.isEmpty)
        XCTAssertNil(s.next())
    }

    func testClearEmptiesIt() throws {
        var s = try script([.match, .cancel])
        s.clear()
        XCTAssertTrue(s.isEmpty)
        XCTAssertEqual(s.count, 0)
    }

    /// Touches are the sensor's; everything else is the prompt's.
    func testWhichEventsAreTouches() {
        let cases: [(SimulatedEvent.Kind, SensorReading?)] = [
            (.match, .match), (.nomatch, .noMatch), (.cancel, nil), (.fallback, nil), (.retry, nil), (.passcode, nil),
        ]
        XCTAssertEqual(
            cases.map(\.0).sorted { $0.rawValue < $1.rawValue },
            SimulatedEvent.Kind.allCases.sorted { $0.rawValue < $1.rawValue }
        )
        for (kind, reading) in cases {
            XCTAssertEqual(SimulatedEvent(kind, passcode: kind == .passcode ? "1234" : nil).touch, reading, "\(kind)")
        }
    }
}
