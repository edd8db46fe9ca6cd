@testable import EnclaveServer
import Foundation
import XCTest

final class DeadlineTests: XCTestCase {
    /// Counts firings; one test's deadlines only.
    final class Firings: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func fire() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }

    func testItFiresOnceAfterItsTime() async throws {
        let firings = Firings()
        let fired = expectation(description: "fired")
        let deadline = Deadline(after: 0.02) { firings.fire(); fired.fulfill() }
        await fulfillment(of: [fired], timeout: 5)
        deadline.cancel()
        try await Task.sleep(nanoseconds: 50_000_000)
        XCTAssertEqual(firings.value, 1)
    }

    func testACancelledDeadlineNeverFires() async throws {
        let firings = Firings()
        let deadline = Deadline(after: 0.05) { firings.fire() }
        deadline.cancel()
        // A deadline due 50 ms after it fires: the cancelled one did not.
        let later = expectation(description: "a later deadline fired")
        let witness = Deadline(after: 0.1) { later.fulfill() }
        await fulfillment(of: [later], timeout: 5)
        witness.cancel()
        XCTAssertEqual(firings.value, 0)
    }
}
