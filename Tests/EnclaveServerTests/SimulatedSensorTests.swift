import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

@testable import EnclaveServer

/// The simulated sensor reads the touches placed on it, one per capture, like a real reader's scans.
final class SimulatedSensorTests: XCTestCase {
    private let uid: UInt32 = 1000

    /// A capture of `sensor` for `uid`, running.
    private static func capturing(_ sensor: SimulatedSensor, uid: UInt32) -> Task<SensorReading, any Error> {
        Task { try await sensor.capture(uid: uid, retry: { _ in }) }
    }

    struct NoReading: Error {}

    /// `capture`'s reading, or `NoReading` after 5 s (the capture is then cancelled): a broken
    /// sensor fails the test instead of hanging it.
    private static func reading(of capture: Task<SensorReading, any Error>) async throws -> SensorReading {
        try await withThrowingTaskGroup(of: SensorReading?.self) { group in
            group.addTask { try await capture.value }
            group.addTask {
                try? await Task.sleep(nanoseconds: 5_000_000_000)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let reading = first else {
                capture.cancel()
                throw NoReading()
            }
            return reading
        }
    }

    /// `capture` ends with `CancellationError`, having read nothing.
    private static func assertEndsCancelled(
        _ capture: Task<SensorReading, any Error>,
        _ what: String,
        file: StaticString = #filePath,
        line: UInt = #line
    ) async throws {
        do {
            let reading = try await reading(of: capture)
            XCTFail("\(what): read \(reading)", file: file, line: line)
        } catch is CancellationError {}
    }

    /// Until a capture of `uid` waits on `sensor` (at most 5 s).
    /// (The in-process daemon's tests wait with it too: a capture's task starts on its own.)
    static func waitForCapture(_ sensor: SimulatedSensor, uid: UInt32) async throws {
        let deadline = Date().addingTimeInterval(5)
        while !sensor.hasWaitingCapture(uid: uid) {
            guard Date() < deadline else { throw NoCapture(uid: uid) }
            try await Task.sleep(nanoseconds: 1_000_000)
        }
    }

    struct NoCapture: Error, CustomStringConvertible {
        var uid: UInt32
        var description: String { "no capture of uid \(uid) waited on the sensor within 5 s" }
    }

    func testATouchPlacedBeforeTheCaptureIsItsReading() async throws {
        let sensor = SimulatedSensor(kind: .touchID)
        XCTAssertTrue(sensor.place(.noMatch, uid: uid))
        let reading = try await Self.reading(of: Self.capturing(sensor, uid: uid))
        XCTAssertEqual(reading, .noMatch)
    }

    func testAWaitingCaptureReadsTheNextTouch() async throws {
        let sensor = SimulatedSensor(kind: .faceID)
        let capture = Self.capturing(sensor, uid: uid)
        try await Self.waitForCapture(sensor, uid: uid)
        XCTAssertTrue(sensor.place(.match, uid: uid))
        let reading = try await Self.reading(of: capture)
        XCTAssertEqual(reading, .match)
    }

    /// One reading per capture: a second touch waits for the next capture, a third is refused
    /// while the second lies unread.
    func testOneTouchPerCapture() async throws {
        let sensor = SimulatedSensor(kind: .touchID)
        XCTAssertTrue(sensor.place(.noMatch, uid: uid))
        XCTAssertFalse(sensor.place(.match, uid: uid), "a touch already lies unread")
        let first = try await Self.reading(of: Self.capturing(sensor, uid: uid))
        XCTAssertEqual(first, .noMatch)
        XCTAssertTrue(sensor.place(.match, uid: uid))
        let second = try await Self.reading(of: Self.capturing(sensor, uid: uid))
        XCTAssertEqual(second, .match)
    }

    /// A touch nobody read is gone once the sensor is disarmed: the next capture waits.
    func testDisarmingTakesAnUnreadTouchAway() async throws {
        let sensor = SimulatedSensor(kind: .touchID)
        XCTAssertTrue(sensor.place(.match, uid: uid))
        sensor.disarm(uid: uid)
        let capture = Self.capturing(sensor, uid: uid)
        try await Self.waitForCapture(sensor, uid: uid)
        capture.cancel()
        try await Self.assertEndsCancelled(capture, "after the touch was taken away")
        XCTAssertTrue(sensor.place(.noMatch, uid: uid), "the cancelled capture left nothing behind")
        let reading = try await Self.reading(of: Self.capturing(sensor, uid: uid))
        XCTAssertEqual(reading, .noMatch)
    }

    /// A capture cancelled before it begins to wait reads nothing and takes no touch: the touch
    /// lying there is the next capture's.
    func testACaptureCancelledBeforeItWaitsTakesNoTouch() async throws {
        let sensor = SimulatedSensor(kind: .touchID)
        XCTAssertTrue(sensor.place(.match, uid: uid))
        let capture = Task<SensorReading, any Error> {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await sensor.capture(uid: 1000, retry: { _ in })
        }
        try await Self.assertEndsCancelled(capture, "cancelled before it waited")
        XCTAssertFalse(sensor.place(.noMatch, uid: uid), "the first touch still lies there")
        let reading = try await Self.reading(of: Self.capturing(sensor, uid: uid))
        XCTAssertEqual(reading, .match)
    }

    /// A new capture while an old one still waits (the old one's cancellation not yet seen): the
    /// old one ends, the new one reads.
    func testANewCaptureEndsTheOneItReplaces() async throws {
        let sensor = SimulatedSensor(kind: .touchID)
        let old = Self.capturing(sensor, uid: uid)
        try await Self.waitForCapture(sensor, uid: uid)
        let new = Self.capturing(sensor, uid: uid)
        // The old capture ends when the new one takes its place.
        try await Self.assertEndsCancelled(old, "the replaced capture")
        XCTAssertTrue(sensor.place(.match, uid: uid))
        let reading = try await Self.reading(of: new)
        XCTAssertEqual(reading, .match)
    }

    func testEachUserHasTheirOwnSensorSlot() async throws {
        let sensor = SimulatedSensor(kind: .touchID)
        XCTAssertTrue(sensor.place(.match, uid: 1001))
        XCTAssertTrue(sensor.place(.noMatch, uid: 1002))
        let a = try await Self.reading(of: Self.capturing(sensor, uid: 1001))
        let b = try await Self.reading(of: Self.capturing(sensor, uid: 1002))
        XCTAssertEqual(a, .match)
        XCTAssertEqual(b, .noMatch)
    }
}
