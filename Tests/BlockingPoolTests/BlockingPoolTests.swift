import BlockingPool
import Foundation
import Synchronization
import XCTest

final class BlockingPoolTests: XCTestCase {
    /// Work that holds its thread until the gate opens, counting how many hold one at once.
    final class Gate: Sendable {
        private let opened = Atomic(false)
        private let running = Atomic(0)
        private let peak = Atomic(0)
        private let entered = Atomic(0)

        func open() { opened.store(true, ordering: .releasing) }
        var peakRunning: Int { peak.load(ordering: .acquiring) }
        var enteredCount: Int { entered.load(ordering: .acquiring) }

        func hold() -> Int {
            let now = running.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
            _ = entered.wrappingAdd(1, ordering: .acquiringAndReleasing)
            var seen = peak.load(ordering: .acquiring)
            while now > seen,
                !peak.compareExchange(expected: seen, desired: now, ordering: .acquiringAndReleasing).exchanged
            {
                seen = peak.load(ordering: .acquiring)
            }
            // Bounded: a test that goes wrong ends instead of hanging.
            for _ in 0..<3_000 where !opened.load(ordering: .acquiring) { usleep(1_000) }
            running.wrappingSubtract(1, ordering: .acquiringAndReleasing)
            return 1
        }
    }

    private func waitUntil(_ condition: @Sendable () -> Bool) async throws {
        for _ in 0..<3_000 where !condition() { try await Task.sleep(nanoseconds: 1_000_000) }
    }

    func testAtMostItsThreadsRunAtOnceAndTheRestQueue() async throws {
        let pool = BlockingPool(threads: 2, name: "test-pool-")
        let gate = Gate()
        let done = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<5 { group.addTask { try await pool.run { gate.hold() } } }
            try await waitUntil { gate.enteredCount >= 2 }
            try await Task.sleep(nanoseconds: 50_000_000)
            XCTAssertEqual(gate.enteredCount, 2, "the other three wait for a thread")
            gate.open()
            return try await group.reduce(0, +)
        }
        XCTAssertEqual(done, 5, "every piece of work ran")
        XCTAssertEqual(gate.peakRunning, 2)
    }

    /// Its threads carry its name, as the kernel shows them (a crash report names the thread).
    func testItsThreadsAreNamedAfterThePool() {
        let pool = BlockingPool(threads: 1, name: "la-named-")
        let submitted = DispatchSemaphore(value: 0)
        let seen = Mutex("")
        pool.submit { active in
            XCTAssertTrue(active)
            seen.withLock { $0 = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "" }
            submitted.signal()
        }
        XCTAssertEqual(submitted.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(seen.withLock { $0 }, "la-named-0\n", "submitted work runs on the pool's thread")
    }

    func testAnAdmissionRefusesPastItsLimitAtOnceAndFreesItsPlaces() async throws {
        let pool = BlockingPool(threads: 1, name: "test-pool-")
        let gate = Gate()
        let admission = pool.admitting(atMost: 3)
        let done = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<3 { group.addTask { try await admission.run { gate.hold() } } }
            // One runs, two wait for the thread: all three hold their places.
            try await waitUntil { admission.admittedNow == 3 }
            XCTAssertEqual(admission.admittedNow, 3)
            do {
                _ = try await admission.run { 0 }
                XCTFail("a fourth is admitted")
            } catch is BlockingPool.Admission.Full {}
            gate.open()
            return try await group.reduce(0, +)
        }
        XCTAssertEqual(done, 3)
        XCTAssertEqual(admission.admittedNow, 0)
        let afterwards = try await admission.run { 7 }
        XCTAssertEqual(afterwards, 7, "the places are free again")
    }

    func testAnErrorOfTheWorkReachesTheCallerAndFreesItsPlace() async throws {
        struct Broken: Error {}
        let admission = BlockingPool(threads: 1, name: "test-pool-").admitting(atMost: 1)
        do {
            _ = try await admission.run { () throws -> Int in throw Broken() }
            XCTFail("no error")
        } catch is Broken {}
        let after = try await admission.run { 1 }
        XCTAssertEqual(after, 1)
    }
}
