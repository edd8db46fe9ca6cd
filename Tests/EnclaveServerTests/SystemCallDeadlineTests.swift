import Foundation
import Synchronization
import XCTest

@testable import EnclaveServer

#if canImport(Glibc)
import Glibc
#endif

final class SystemCallDeadlineTests: XCTestCase {
    /// A pipe whose write end is blocking and full: a write there blocks until someone reads.
    private func fullPipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while Glibc.write(fds[1], &chunk, chunk.count) > 0 {}
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) & ~O_NONBLOCK)
        return (fds[0], fds[1])
    }

    /// On a thread of its own, as the daemon uses it; nil if it did not return within 10 s.
    private func onItsOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T? {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        _ = LoopThread(name: "test.system-call-deadline") {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        guard done.wait(timeout: .now() + 10) == .success else { return nil }
        return result.withLock { $0 }
    }

    func testABlockedWriteIsInterruptedOnceTheDeadlinePasses() throws {
        let (readEnd, writeEnd) = try fullPipe()
        defer {
            close(readEnd)
            close(writeEnd)
        }
        let outcome = onItsOwnThread { () -> [Int] in
            SystemCallDeadline.run(within: 0.1) { left -> [Int] in
                var byte: UInt8 = 1
                let n = Glibc.write(writeEnd, &byte, 1)
                return [n, Int(errno), left() <= 0 ? 1 : 0]
            }
        }
        // Without the signal the write would block for good (the helper gives up after 10 s, and
        // the pipe's close at the end of the test releases the thread).
        XCTAssertEqual(outcome, [-1, Int(EINTR), 1], "write's result, errno, and whether the body saw no time left")
    }

    func testACallAfterTheBodyIsNotInterrupted() throws {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let (readEnd, _) = (fds[0], fds[1])
        let outcome = onItsOwnThread { () -> [Int] in
            let left = SystemCallDeadline.run(within: 0.02) { left in left() }
            // Past the deadline the body did not reach: a poll of 300 ms on the same thread times
            // out (0), not cut short by a signal still on its way (-1, EINTR).
            var input = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&input, 1, 300)
            return [left > 0 ? 1 : 0, Int(ready)]
        }
        XCTAssertEqual(outcome, [1, 0])
    }
}
