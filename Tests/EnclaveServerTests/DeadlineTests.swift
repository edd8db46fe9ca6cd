import Foundation
import NIOCore
import NIOPosix
import XCTest

@testable import EnclaveServer

final class DeadlineTests: XCTestCase {
    /// Counts firings; one test's deadlines only.
    final class Firings: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func fire() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }

    /// What a deadline's closure holds, watched through a weak reference.
    final class Sentinel: Sendable {}

    private let loop = MultiThreadedEventLoopGroup.singleton.next()

    func testItFiresOnceAfterItsTime() async throws {
        let firings = Firings()
        let fired = expectation(description: "fired")
        // The monotonic clock NIO's deadlines use (a wall clock may be slewed).
        let start = DispatchTime.now().uptimeNanoseconds
        let deadline = Deadline(after: 0.05, on: loop) {
            firings.fire()
            fired.fulfill()
        }
        await fulfillment(of: [fired], timeout: 5)
        XCTAssertGreaterThanOrEqual(DispatchTime.now().uptimeNanoseconds - start, 49_000_000, "not before its time")
        deadline.cancel()
        try await Task.sleep(nanoseconds: 50_000_000)
        XCTAssertEqual(firings.value, 1)
    }

    func testACancelledDeadlineNeverFires() async throws {
        let firings = Firings()
        let deadline = Deadline(after: 0.5, on: loop) { firings.fire() }
        deadline.cancel()
        // One due after it on the same loop fires: the cancelled one, due first, did not.
        let later = expectation(description: "a later deadline fired")
        let witness = Deadline(after: 1, on: loop) { later.fulfill() }
        await fulfillment(of: [later], timeout: 5)
        witness.cancel()
        XCTAssertEqual(firings.value, 0)
    }

    /// A cancelled deadline lets go of what its closure holds (a prompt's stream, an agent) at
    /// once, not at its time. (What a cancelled `Task.sleep` kept, its task object, no test can
    /// watch from Swift: `PromptFloodTests` shows that one through the daemon's memory.)
    func testCancellingLetsGoOfTheClosureAtOnce() async throws {
        weak var watched: Sentinel?
        let deadline: Deadline = {
            let sentinel = Sentinel()
            watched = sentinel
            return Deadline(after: 300, on: loop) { _ = sentinel }
        }()
        XCTAssertNotNil(watched, "held while the deadline waits")
        // Cancelled from the loop's own thread, as an evaluation on that loop does.
        try await loop.submit { deadline.cancel() }.get()
        XCTAssertNil(watched, "let go of as soon as it was cancelled")
    }

    /// Times past what the loop can take are clamped: negative and NaN fire at once, infinity waits.
    func testTimesAreClamped() async throws {
        let now = expectation(description: "negative and NaN fire at once")
        now.expectedFulfillmentCount = 2
        let negative = Deadline(after: -1, on: loop) { now.fulfill() }
        let nan = Deadline(after: .nan, on: loop) { now.fulfill() }
        await fulfillment(of: [now], timeout: 5)
        let firings = Firings()
        let forever = Deadline(after: .infinity, on: loop) { firings.fire() }
        try await Task.sleep(nanoseconds: 50_000_000)
        XCTAssertEqual(firings.value, 0)
        for element in [negative, nan, forever] { element.cancel() }
    }
}
