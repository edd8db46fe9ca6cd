import CPeerSocket
import Foundation
import XCTest

@testable import EnclaveServer

#if canImport(Glibc)
import Glibc
#endif

final class SecretLinesTests: XCTestCase {
    /// A pipe whose write end the test keeps; the read end goes to `SecretLines`.
    private func lines(_ input: String, timeout: Double = 2) throws -> SecretLines {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        XCTAssertEqual(Glibc.write(fds[1], input, input.utf8.count), input.utf8.count)
        close(fds[1])
        return SecretLines(owning: fds[0], timeout: timeout)
    }

    func testItReadsOneLineAtATime() async throws {
        let lines = try lines("135790\r\nsecond\nlast without a newline")
        let first = try await lines.next("passcode")
        let second = try await lines.next("passcode")
        let last = try await lines.next("passcode")
        XCTAssertEqual([first, second, last], ["135790", "second", "last without a newline"])
        do {
            _ = try await lines.next("new passcode")
            XCTFail("a line past the end")
        } catch {
            XCTAssertEqual(error.code, .invalidParameter)
            XCTAssertTrue(error.message.contains("no line for the new passcode"), error.message)
        }
    }

    /// Attack: `O_NONBLOCK`, which the daemon sets, belongs to the open file description the sender
    /// shares. A sender that clears it and takes the data back between the daemon's `poll` and its
    /// `read` (a pipe it drains itself) left that read blocked for good, and with it a thread of
    /// the daemon's and the administration request that waited for the line. Here the same
    /// read, deterministically: a socket whose low-water mark holds a read of one byte until more
    /// come, though `poll` says it is readable. The read now ends at the deadline, as a pipe that
    /// gives no line does.
    func testASenderThatClearsNonBlockingCannotHoldTheRead() async throws {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        var lowWater: Int32 = 64
        XCTAssertEqual(setsockopt(fds[0], SOL_SOCKET, SO_RCVLOWAT, &lowWater, socklen_t(MemoryLayout<Int32>.size)), 0)
        let theirs = dup(fds[0])
        let lines = SecretLines(owning: fds[0], timeout: 0.5)
        defer {
            close(theirs)
            close(fds[1])
        }
        // The sender's copy of the description: blocking again.
        _ = fcntl(theirs, F_SETFL, fcntl(theirs, F_GETFL) & ~O_NONBLOCK)
        XCTAssertEqual(Glibc.write(fds[1], "1", 1), 1)
        let outcome = await withTaskGroup(of: String.self) { group in
            group.addTask {
                do {
                    return try await lines.next("passcode")
                } catch {
                    return (error as? DaemonError)?.message ?? "\(error)"
                }
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return "still reading after 5 s"
            }
            let first = await group.next()!
            // Release a read still blocked (it waits for 64 bytes) so the test can end.
            _ = Glibc.write(fds[1], String(repeating: "\n", count: 64), 64)
            group.cancelAll()
            return first
        }
        XCTAssertTrue(outcome.contains("no line for the passcode"), outcome)
    }
}
