import Foundation
import Synchronization
import XCTest

@testable import EnclaveServer

#if canImport(Glibc)
import Glibc
#endif

final class SystemCallInterruptionTests: XCTestCase {
    /// A pipe whose write end is blocking and full: a write there blocks until someone reads.
    private func fullPipe() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while Glibc.write(fds[1], &chunk, chunk.count) > 0 {}
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) & ~O_NONBLOCK)
        return (fds[0], fds[1])
    }

    /// A pipe with nothing in it: a read there blocks until someone writes.
    private func emptyPipe() -> [Int32] {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        return fds
    }

    /// On a thread of its own, as the daemon uses it; nil if it did not return within 10 s
    /// (without the signal a blocked call would wait for good: closing the test's pipes at its
    /// end releases the thread).
    private func onItsOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T? {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        _ = LoopThread(name: "test-interrupt") {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        guard done.wait(timeout: .now() + 10) == .success else { return nil }
        return result.withLock { $0 }
    }

    func testABlockedWriteIsInterruptedOnceTheDeadlinePasses() {
        let (readEnd, writeEnd) = fullPipe()
        defer {
            close(readEnd)
            close(writeEnd)
        }
        let outcome = onItsOwnThread { () -> [Int] in
            SystemCallInterruption.run(within: 0.1) { left -> [Int] in
                var byte: UInt8 = 1
                let n = Glibc.write(writeEnd, &byte, 1)
                return [n, Int(errno), left() <= 0 ? 1 : 0]
            }
        }
        XCTAssertEqual(outcome, [-1, Int(EINTR), 1], "write's result, errno, and whether the body saw no time left")
    }

    func testAnotherThreadEndsABlockedReadAndEveryBodyAfter() {
        let fds = emptyPipe()
        defer {
            close(fds[0])
            close(fds[1])
        }
        let readEnd = fds[0]
        let interruption = SystemCallInterruption()
        let aboutToRead = DispatchSemaphore(value: 0)
        // Interrupts once the body is in (or about to enter) its read, not before it began.
        let interrupter = LoopThread(name: "test-interrupts") {
            aboutToRead.wait()
            usleep(50_000)
            interruption.interrupt()
        }
        let outcome = onItsOwnThread { () -> [Int] in
            let first = interruption.run { left -> [Int] in
                aboutToRead.signal()
                var byte: UInt8 = 0
                let n = Glibc.read(readEnd, &byte, 1)
                return [n, Int(errno), left() <= 0 ? 1 : 0]
            }
            // A body begun after the interruption is told at once, before any call.
            let after = interruption.run { left in left() <= 0 ? 1 : 0 }
            return first + [after]
        }
        interrupter.join()
        XCTAssertEqual(outcome, [-1, Int(EINTR), 1, 1])
    }

    func testACallAfterTheBodyIsNotInterrupted() {
        let fds = emptyPipe()
        defer {
            close(fds[0])
            close(fds[1])
        }
        let readEnd = fds[0]
        let outcome = onItsOwnThread { () -> [Int] in
            // The body outlasts its deadline, so signals are sent while it runs (every 10 ms).
            let slept = SystemCallInterruption.run(within: 0.02) { left -> Int in
                var slept = 0
                while slept < 60 {
                    usleep(5_000)
                    slept += 5
                }
                return left() <= 0 ? 1 : 0
            }
            // After it, none reaches the thread: a poll of 300 ms times out (0), not cut short by
            // a signal (-1, EINTR). The end of the body stops the signals; blocking SIGURG again
            // covers one already on its way, which this cannot force.
            var input = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&input, 1, 300)
            return [slept, Int(ready)]
        }
        XCTAssertEqual(outcome, [1, 0])
    }
}
