import Foundation
import IntegrationSupport
import Synchronization
import XCTest

@testable import EnclaveServer

/// What a client handed over and the daemon does not keep is closed in its user's turn, off the
/// handoff socket's thread, and a user whose closes do not end hands over no more.
final class HandedDescriptorCloserTests: XCTestCase {
    /// Attack: a user's closes that never end (a file on FUSE whose server never answers FLUSH;
    /// here, until the test lets them go) run `perUser` at a time, the rest waiting behind them;
    /// another user's closes run meanwhile, and the user is refused more once `heldPerUser` are
    /// under way. Ordered by semaphores, not timed.
    func testAUsersClosesThatNeverEndHoldNoOneElse() {
        let release = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        struct Seen {
            var closed: [Int32] = []
            var running = 0
            var mostAtOnce = 0
        }
        let seen = Mutex(Seen())
        let closer = HandedDescriptorCloser { fd in
            let hanging = fd >= 100
            if hanging {
                seen.withLock {
                    $0.running += 1
                    $0.mostAtOnce = max($0.mostAtOnce, $0.running)
                }
                entered.signal()
                release.wait()
            }
            seen.withLock {
                if hanging { $0.running -= 1 }
                $0.closed.append(fd)
            }
            finished.signal()
        }
        let hanging = (100..<(100 + Int32(HandedDescriptorCloser.heldPerUser))).map { $0 }
        for fd in hanging {
            XCTAssertTrue(closer.takesMore(from: 1000), "descriptor \(fd) taken")
            closer.close(fd, of: 1000)
        }
        for _ in 0..<HandedDescriptorCloser.perUser {
            XCTAssertEqual(entered.wait(timeout: .now() + 10), .success)
        }
        XCTAssertFalse(closer.takesMore(from: 1000), "a user with \(hanging.count) closes under way hands no more")
        XCTAssertEqual(closer.underWay(of: 1000), hanging.count)

        XCTAssertTrue(closer.takesMore(from: 1001))
        closer.close(1, of: 1001)
        closer.close(2, of: 1001)
        for _ in 0..<2 { XCTAssertEqual(finished.wait(timeout: .now() + 10), .success) }
        XCTAssertEqual(Set(seen.withLock { $0.closed }), [1, 2], "another user's closes are not held")
        eventually("and end their turn") { closer.underWay(of: 1001) == 0 }

        for _ in hanging { release.signal() }
        for _ in hanging { XCTAssertEqual(finished.wait(timeout: .now() + 10), .success) }
        let final = seen.withLock { $0 }
        XCTAssertEqual(Set(final.closed.dropFirst(2)), Set(hanging), "every descriptor closed once")
        XCTAssertEqual(final.closed.count, hanging.count + 2)
        XCTAssertEqual(
            final.mostAtOnce,
            HandedDescriptorCloser.perUser,
            "the user's turn: \(HandedDescriptorCloser.perUser) at once"
        )
        eventually("the user's closes end their turn") { closer.underWay(of: 1000) == 0 }
        XCTAssertTrue(closer.takesMore(from: 1000), "taken again once the closes end")
    }
}
