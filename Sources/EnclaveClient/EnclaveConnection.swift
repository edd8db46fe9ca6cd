import EnclaveProtocol
import Foundation
#if canImport(Glibc)
import Glibc
#endif

public enum EnclaveClientError: Error, CustomStringConvertible, Equatable {
    case unreachable(String)
    case connectionLost
    case protocolError(String)
    case failure(Failure)

    public var description: String {
        switch self {
        case .unreachable(let why): return "laenclaved is not reachable: \(why)"
        case .connectionLost: return "the connection to laenclaved was lost"
        case .protocolError(let why): return "laenclaved answered something unexpected: \(why)"
        case .failure(let f): return f.message
        }
    }
}

/// One connection to the daemon. Requests may overlap; a reader thread matches replies to
/// requests by id. Evaluations deliver `prompt` replies through `onEvent` before their final reply.
public final class EnclaveConnection: @unchecked Sendable {
    public typealias Completion = @Sendable (Result<Reply, EnclaveClientError>) -> Void
    public typealias EventHandler = @Sendable (Reply) -> Void

    private struct Pending {
        var onEvent: EventHandler?
        var completion: Completion
    }

    public let socketPath: String
    private let fd: Int32
    private let lock = NSLock()
    private let writeLock = NSLock()
    private var nextID: UInt64 = 1
    private var pending: [UInt64: Pending] = [:]
    private var isClosed = false
    /// Guarded by `writeLock`.
    private var descriptorClosed = false
    public private(set) var hello: HelloReply!
    /// The uids the daemon may run as (checked again on the handoff socket).
    let trustedDaemons: Set<UInt32>
    let terminalHandoff = TerminalHandoffState()

    /// Connects and greets. Throws `unreachable` when nothing listens at `path`. `alsoTrusting`:
    /// daemon uids trusted beyond the usual (root reaching a user's own daemon to administer it;
    /// nothing secret may then be sent).
    public init(socketPath path: String, alsoTrusting extra: Set<UInt32> = []) throws {
        socketPath = path
        fd = try Self.connectSocket(path)
        trustedDaemons = Self.trustedDaemonUIDs(socketPath: path).union(extra)
        // Talk only to a daemon the kernel says is trusted: never hand a terminal or a secret to an impostor.
        guard let daemon = PeerCredentials.of(socket: fd), trustedDaemons.contains(daemon.uid) else {
            isClosed = true  // deinit still runs after a throwing init: it must not touch fd again
            Glibc.close(fd)
            throw EnclaveClientError.unreachable("the process at \(path) is not a trusted laenclaved (it runs as another user)")
        }
        let thread = Thread { [self] in readLoop() }
        thread.name = "laenclaved-reader"
        thread.start()
        switch try request(.hello(version: enclaveProtocolVersion)) {
        case .hello(let h): hello = h
        case .failure(let f): close(); throw EnclaveClientError.failure(f)
        case let other: close(); throw EnclaveClientError.protocolError("\(other)")
        }
    }

    deinit { close() }

    /// Who may run the daemon we talk to: ourselves or root; for the system socket also the owner
    /// of its directory (a dedicated daemon user; only root can create it under /run).
    static func trustedDaemonUIDs(socketPath: String) -> Set<UInt32> {
        var trusted: Set<UInt32> = [getuid(), 0]
        if socketPath == EnclavePaths.systemSocket {
            var info = stat()
            if stat((socketPath as NSString).deletingLastPathComponent, &info) == 0 { trusted.insert(info.st_uid) }
        }
        return trusted
    }

    public var closed: Bool { lock.withLock { isClosed } }

    /// A connected Unix stream socket to `path` (close-on-exec); throws `unreachable`.
    public static func connectSocket(_ path: String) throws -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw EnclaveClientError.unreachable("socket path too long: \(path)") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw EnclaveClientError.unreachable(String(cString: strerror(errno))) }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            Glibc.close(fd)
            throw EnclaveClientError.unreachable("\(path): \(String(cString: strerror(e)))")
        }
        return fd
    }

    /// Sends a request; `completion` runs on the reader thread with the final reply.
    @discardableResult
    public func send(_ request: Request, onEvent: EventHandler? = nil, completion: @escaping Completion) -> UInt64 {
        // One decision under one lock: either the request is pending (and `close` will answer
        // it) or the connection is closed (and we answer it here) — never both.
        let (id, accepted): (UInt64, Bool) = lock.withLock {
            let id = nextID
            nextID += 1
            guard !isClosed else { return (id, false) }
            pending[id] = Pending(onEvent: onEvent, completion: completion)
            return (id, true)
        }
        guard accepted else {
            completion(.failure(.connectionLost))
            return id
        }
        let frame: [UInt8]
        do { frame = try FrameEncoder.checkedFrame(RequestEnvelope(id: id, request: request).encoded()) } catch {
            if let p = lock.withLock({ pending.removeValue(forKey: id) }) {
                p.completion(.failure(.protocolError("the request exceeds the \(WireLimits.maxPayloadBytes / 1024) KiB message limit")))
            }
            return id
        }
        if !write(frame) {
            if let p = lock.withLock({ pending.removeValue(forKey: id) }) { p.completion(.failure(.connectionLost)) }
        }
        return id
    }

    /// Blocking form, for the synchronous parts of Apple's API (`canEvaluatePolicy`).
    public func request(_ request: Request) throws -> Reply {
        let semaphore = DispatchSemaphore(value: 0)
        let box = ResultBox()
        send(request) { result in
            box.result = result
            semaphore.signal()
        }
        semaphore.wait()
        return try box.result!.get()
    }

    public func request(_ request: Request, onEvent: EventHandler? = nil) async throws -> Reply {
        try await withCheckedThrowingContinuation { continuation in
            send(request, onEvent: onEvent) { continuation.resume(with: $0) }
        }
    }

    public func close() {
        let waiting: [Pending] = lock.withLock {
            guard !isClosed else { return [] }
            isClosed = true
            shutdown(fd, Int32(SHUT_RDWR))
            defer { pending.removeAll() }
            return Array(pending.values)
        }
        waiting.forEach { $0.completion(.failure(.connectionLost)) }
    }

    private func write(_ bytes: [UInt8]) -> Bool {
        writeLock.withLock {
            // The descriptor is closed under this lock: its number may already belong to another file.
            guard !descriptorClosed else { return false }
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                offset += n
            }
            return true
        }
    }

    private func readLoop() {
        var decoder = FrameDecoder()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        reading: while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            decoder.append(buffer[0..<n])
            do {
                while let frame = try decoder.nextFrame() {
                    let envelope = try ReplyEnvelope.decode(frame)
                    dispatch(envelope)
                }
            } catch {
                break reading
            }
        }
        close()
        writeLock.withLock {
            descriptorClosed = true
            Glibc.close(fd)
        }
    }

    private func dispatch(_ envelope: ReplyEnvelope) {
        if envelope.reply.isFinal {
            if let p = lock.withLock({ pending.removeValue(forKey: envelope.id) }) { p.completion(.success(envelope.reply)) }
        } else if let handler = lock.withLock({ pending[envelope.id]?.onEvent }) {
            handler(envelope.reply)
        }
    }
}

private final class ResultBox: @unchecked Sendable {
    var result: Result<Reply, EnclaveClientError>?
}
