import Foundation
import Synchronization
import TouchLoginAPI
import XCTest

@testable import TouchLoginServer

final class PasswordWorkTests: XCTestCase {
    final class Gate: Sendable {
        private let opened = Atomic(false)
        func open() { opened.store(true, ordering: .releasing) }
        var isOpen: Bool { opened.load(ordering: .acquiring) }
        /// A check that runs until the gate opens.
        func check() -> Int {
            while !isOpen { usleep(1_000) }
            return 1
        }
    }

    static func startBlockedChecks(
        _ count: Int,
        on work: PasswordWork,
        gate: Gate,
        in group: inout ThrowingTaskGroup<Int, Error>
    ) {
        for _ in 0..<count { group.addTask { try await work.run { gate.check() } } }
    }

    /// Past `limit` checks running or waiting, the next is told "busy" at once instead of queueing;
    /// a place frees as soon as a check ends.
    func testAFloodPastTheLimitIsTurnedAwayAtOnce() async throws {
        let work = PasswordWork(limit: 3)
        let gate = Gate()
        let done = try await withThrowingTaskGroup(of: Int.self) { group in
            Self.startBlockedChecks(3, on: work, gate: gate, in: &group)
            group.addTask {  // a fourth admitted by mistake must not hang the test: the gate opens after 3 s regardless
                for _ in 0..<300 where !gate.isOpen { try await Task.sleep(nanoseconds: 10_000_000) }
                gate.open()
                return 0
            }
            // The three hold their places while they run or wait for a thread.
            while work.admitted < 3 { try await Task.sleep(nanoseconds: 1_000_000) }
            var turnedAway: String?
            do { _ = try await work.run { 0 } } catch let e as APIError { turnedAway = e.code }
            XCTAssertEqual(turnedAway, APIError.Code.unavailable.rawValue, "a fourth check is turned away")
            gate.open()
            return try await group.reduce(0, +)
        }
        XCTAssertEqual(done, 3)
        let afterwards = try await work.run { 7 }
        XCTAssertEqual(afterwards, 7, "the places are free again")
    }
}
