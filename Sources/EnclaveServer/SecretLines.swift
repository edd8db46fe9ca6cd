import CPeerSocket
import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A handed pipe (`HandedDescriptor.secretInput`: never a file, whose read could wait on a FUSE
/// server), read one line (one secret) at a time. The read waits in `poll` on a
/// thread of its own, at most `timeout` seconds: a script that hands a pipe and writes nothing
/// gets an error, never a daemon that waits forever.
final class SecretLines: Sendable {
    static let timeout: Double = 10
    private let fd: Int32
    /// `timeout`, unless a test says otherwise.
    private let deadline: Double
    /// What was read past the last line taken; one reader at a time holds it.
    private let buffer = Mutex<[UInt8]>([])

    /// Owns `fd`: it is closed (and what was read but not used is overwritten) when the last
    /// reference goes — a read in progress holds one, so its descriptor is never closed under it.
    init(owning fd: Int32, timeout: Double = SecretLines.timeout) {
        self.fd = fd
        self.deadline = timeout
        // Non-blocking: a shared stdin drained by another process between poll and read must not
        // leave the reader blocked for good. The flag is the open file description's, which the
        // sender shares: a read a sender blocked by clearing it is interrupted at the deadline
        // (`SystemCallInterruption`).
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        buffer.withLock { buffer in for i in buffer.indices { buffer[i] = 0 } }
        Glibc.close(fd)
    }

    private enum Read {
        case line(String)
        case noLine, tooLong
    }

    /// The next line, which holds the `what` the person gave.
    func next(_ what: String) async throws(DaemonError) -> String {
        let read: Read = await LoopThread.run(name: "la-secret-input") { [self] in
            buffer.withLock { Self.readLine(from: fd, into: &$0, within: deadline) }
        }
        switch read {
        case .line(let line): return line
        case .noLine: throw DaemonError(.invalidParameter, "the secret input has no line for the \(what)")
        case .tooLong:
            throw DaemonError(.invalidParameter, "a passcode has at most \(WireLimits.maxPasscodeBytes) bytes")
        }
    }

    /// On a thread of its own (`SystemCallInterruption` signals it to end a read its sender blocked).
    private static func readLine(from fd: Int32, into buffer: inout [UInt8], within timeout: Double) -> Read {
        SystemCallInterruption.run(within: timeout) { left in readLine(from: fd, into: &buffer, left: left) }
    }

    private static func readLine(from fd: Int32, into buffer: inout [UInt8], left: () -> Double) -> Read {
        var chunk = [UInt8](repeating: 0, count: 512)
        while true {
            if let end = buffer.firstIndex(of: 10) {
                defer {
                    for i in 0...end { buffer[i] = 0 }
                    buffer.removeFirst(end + 1)
                }
                var line = Array(buffer[..<end])
                defer { for i in line.indices { line[i] = 0 } }
                if line.last == 13 { line.removeLast() }
                guard line.count <= WireLimits.maxPasscodeBytes else { return .tooLong }
                return .line(String(decoding: line, as: UTF8.self))
            }
            guard buffer.count <= WireLimits.maxPasscodeBytes + 2 else { return .tooLong }
            let left = left()
            guard left > 0 else { return .noLine }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(max(1, (left * 1000).rounded(.up))))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return .noLine }
            let n = Glibc.read(fd, &chunk, chunk.count)
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard n > 0 else {
                // End of input: a last line without its newline still counts.
                guard !buffer.isEmpty else { return .noLine }
                buffer.append(10)
                continue
            }
            buffer += chunk[..<n]
            for i in 0..<n { chunk[i] = 0 }
        }
    }
}
