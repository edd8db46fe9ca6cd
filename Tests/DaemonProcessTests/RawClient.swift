// MSG_NOSIGNAL: some compile jobs find glibc's socket constants only through CPeerSocket (which
// includes sys/socket.h and exports it), not through Glibc (seen 2026-11-30).
import CPeerSocket
import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

// MARK: - A raw client: bytes on a Unix socket, no help from EnclaveConnection

enum RawClientError: Error, CustomStringConvertible {
    case connect(String)
    case timeout(TimeInterval)
    case notJSON(String)

    var description: String {
        switch self {
        case .connect(let why): return "cannot connect: \(why)"
        case .timeout(let t): return "no reply and no close within \(t) s"
        case .notJSON(let text): return "the daemon sent a frame that is not a JSON object: \(text)"
        }
    }
}

/// One connection to the daemon's socket that writes exactly the bytes a test asks for and
/// parses replies by hand (4-byte big-endian length + JSON object).
final class RawClient {
    enum Frame {
        case payload([UInt8])
        case closed, timeout
    }

    private(set) var fd: Int32
    private var buffer: [UInt8] = []
    private var sawEOF = false

    init(path: String) throws {
        do { fd = try EnclaveConnection.connectSocket(path) } catch { throw RawClientError.connect("\(error)") }
    }

    deinit { close() }

    /// Writes `bytes` as they are. False when the daemon has already closed (EPIPE, ECONNRESET).
    @discardableResult
    func sendRaw(_ bytes: [UInt8]) -> Bool {
        guard fd >= 0 else { return false }
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    /// Writes the 4-byte big-endian length of `payload`, then `payload` (no size check: tests lie on purpose elsewhere).
    @discardableResult
    func sendFrame(_ payload: [UInt8]) -> Bool {
        sendRaw(Self.header(payload.count) + payload)
    }

    @discardableResult
    func sendFrame(_ text: String) -> Bool { sendFrame(Array(text.utf8)) }

    /// Serialises a JSON object (keys sorted) and sends it as one frame.
    @discardableResult
    func sendJSON(_ object: [String: Any]) -> Bool {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return sendFrame(Array(data))
    }

    /// Sends a well-formed request `{"id":id,"op":op,"args":args}`.
    @discardableResult
    func sendRequest(id: UInt64, op: String, args: [String: Any]? = nil) -> Bool {
        var object: [String: Any] = ["id": Int(id), "op": op]
        if let args { object["args"] = args }
        return sendJSON(object)
    }

    static func header(_ length: Int) -> [UInt8] {
        let n = UInt32(truncatingIfNeeded: length)
        return [UInt8(n >> 24 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)]
    }

    /// The next whole frame the daemon sent, `.closed` on end of stream (or reset), `.timeout` otherwise.
    func readFrame(timeout: TimeInterval = 10) -> Frame {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if buffer.count >= 4 {
                let length = buffer[0..<4].reduce(0) { $0 << 8 | Int($1) }
                if buffer.count >= 4 + length {
                    let payload = Array(buffer[4..<4 + length])
                    buffer.removeFirst(4 + length)
                    return .payload(payload)
                }
            }
            if sawEOF || fd < 0 { return .closed }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { return .timeout }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(min(remaining * 1000, 1000).rounded(.up)))
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { continue }
            if n <= 0 {
                sawEOF = true
                continue
            }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// The next reply as a JSON dictionary; nil when the daemon closed the connection.
    /// Throws when neither happens within `timeout` (a hang is a bug too).
    func readReply(timeout: TimeInterval = 10) throws -> [String: Any]? {
        switch readFrame(timeout: timeout) {
        case .closed: return nil
        case .timeout: throw RawClientError.timeout(timeout)
        case .payload(let bytes):
            guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
                throw RawClientError.notJSON(String(decoding: bytes, as: UTF8.self))
            }
            return object
        }
    }

    /// True when the daemon closes the stream within `timeout` without sending anything more.
    func isClosed(timeout: TimeInterval = 10) -> Bool {
        if case .closed = readFrame(timeout: timeout) { return true }
        return false
    }

    /// Closes at once with a reset (SO_LINGER 0): the way a crashing client vanishes.
    func abort() {
        guard fd >= 0 else { return }
        var l = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
        close()
    }

    func shutdownWrite() { if fd >= 0 { _ = shutdown(fd, Int32(SHUT_WR)) } }

    func close() {
        guard fd >= 0 else { return }
        Glibc.close(fd)
        fd = -1
    }
}

// MARK: - Reply helpers

func number(_ any: Any?) -> Int64? {
    switch any {
    case let n as Int: return Int64(n)
    case let n as Int64: return n
    case let n as UInt64: return Int64(exactly: n)
    case let n as NSNumber: return n.int64Value
    default: return nil
    }
}
