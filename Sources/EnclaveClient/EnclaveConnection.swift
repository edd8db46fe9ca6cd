import EnclaveProtocol
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One connection to the daemon. Requests may overlap; replies are matched to requests by id.
/// Evaluations deliver `prompt` replies through `onEvent` before their final reply.
///
/// Who reads the socket (one reader at a time, the "reader role"): a blocking `request` reads its
/// own reply on the calling thread, as a plain request/response client would — no thread wakes
/// another to hand it over — and answers any other reply it meets on the way. Callback and `async`
/// requests are read by a thread of the connection's own, started when one is sent and nobody
/// reads; it keeps reading after the last one is answered (the next one's reply then wakes it
/// directly) until a blocking request's reply passes through it, or `lingerMilliseconds` pass with
/// nothing to read, and then ends, so that a run of blocking requests reads for itself after at
/// most one hand-over, and an idle connection keeps no thread. A request whose answer nobody
/// needs (`sendDiscardingReply`: a released context's `invalidate`) starts no thread: whoever
/// reads next drops its reply. When the role is free, nothing reads: a daemon that went away is
/// seen by `closed` (a zero-timeout poll) or by the next request.
///
/// Unchecked: a thin owner of the socket's descriptor. Its state is behind `state` (an
/// `NSCondition`, on which the connection's own reader thread waits for the role; a blocking
/// request's thread sleeps on its `Waiter`'s semaphore), the reader's own state is touched only by
/// the thread holding the reader role, and writes by `writeLock`.
public final class EnclaveConnection: @unchecked Sendable {
    public typealias Completion = @Sendable (Result<Reply, EnclaveClientError>) -> Void
    public typealias EventHandler = @Sendable (Reply) -> Void

    /// A blocking request's place for its reply, filled by whoever holds the reader role.
    final class Waiter {
        var result: Result<Reply, EnclaveClientError>?
        /// Its thread sleeps on it while another reads: signalled once each time it is taken off
        /// `sleepers` (its reply came, the connection ended, or the reader role is free for it).
        let wake = DispatchSemaphore(value: 0)
    }

    enum Pending {
        /// A `send` or `async` request: answered on the reading thread.
        case callback(onEvent: EventHandler?, completion: Completion)
        /// A blocking `request`: its thread waits (or reads) until `waiter` is filled.
        case blocking(Waiter)
        /// A request nobody waits for (`sendDiscardingReply`): whoever reads drops its reply.
        case discarded
    }

    public let socketPath: String
    let fd: Int32
    /// Guards everything below but the reader's own state; the connection's own reader thread
    /// waits on it for the role.
    let state = NSCondition()
    private let writeLock = NSLock()
    private var nextID: UInt64 = 1
    var pending: [UInt64: Pending] = [:]
    /// Callback requests among `pending`: while there are any, the connection's thread reads.
    var callbacksPending = 0
    /// Requests among `pending` whose replies are dropped unread.
    var discardedPending = 0
    var isClosed = false
    /// Whether the last final reply read was a blocking request's: the connection's thread then
    /// ends once no callback request waits (see the type's comment).
    var lastFinalWasBlocking = false
    /// Someone holds the reader role (`readerState` is theirs).
    var readerBusy = false
    var readerThreadStarted = false
    /// Blocking requests' threads asleep while another reads, in the order they last fell asleep.
    /// A reply wakes its own thread, and a freed reader role the first still without its reply
    /// (one `state` broadcast woke every thread sharing the connection for every reply). The
    /// connection's own reader thread alone waits on `state`.
    var sleepers: [Waiter] = []
    /// Times a blocking request's thread woke to find neither its reply nor the reader role free
    /// (for tests).
    var wakesForNothing = 0
    /// Only the reader role's holder touches it.
    var readerState = ReaderState()
    /// Guarded by `writeLock`.
    private var descriptorClosed = false
    public private(set) var hello: HelloReply!
    /// The reason a daemon gave, in a reply to no request, for refusing this connection.
    var refusal: Failure?
    /// The uids the daemon may run as (checked again on the handoff socket).
    let trustedDaemons: Set<UInt32>
    let terminalHandoff = TerminalHandoffState()
    /// Whether the daemon's hello answer named `BinaryWire`: every message after it is coded so.
    let binary = Atomic(false)
    var encoding: WireEncoding { binary.load(ordering: .acquiring) ? .binary : .json }

    struct ReaderState {
        var decoder = FrameDecoder()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    }

    /// Connects and greets. Throws `unreachable` when nothing listens at `path`. `alsoTrusting`:
    /// daemon uids trusted beyond the usual (root reaching a user's own daemon to administer it;
    /// nothing secret may then be sent).
    public init(socketPath path: String, alsoTrusting extra: Set<UInt32> = []) throws {
        socketPath = path
        fd = try Self.connectSocket(path)
        trustedDaemons = Self.trustedDaemonUIDs(socketPath: path).union(extra)
        // Talk only to a daemon the kernel says is trusted: never hand a terminal or a secret to an impostor.
        let daemon = PeerCredentials.of(socket: fd)
        guard let daemon, trustedDaemons.contains(daemon.uid) else {
            isClosed = true  // deinit still runs after a throwing init: it must not touch fd again
            descriptorClosed = true
            Glibc.close(fd)
            throw EnclaveClientError.untrustedDaemon(path: path, uid: daemon?.uid)
        }
        let greeting: Reply
        let offer = Request.Hello(version: enclaveProtocolVersion, encodings: [WireEncoding.binary.rawValue])
        do { greeting = try request(.hello(offer)) } catch EnclaveClientError
            .connectionLost
        {
            // A daemon that refuses a client says why in a reply to no request, then closes.
            if let refusal = state.withLock({ refusal }) { throw EnclaveClientError.failure(refusal) }
            throw EnclaveClientError.connectionLost
        }
        switch greeting {
        case .hello(let h) where h.encoding.map { WireEncoding(rawValue: $0) == nil } ?? false:
            close()
            throw EnclaveClientError.protocolError(
                "the daemon named a coding this client did not offer: \(h.encoding!)"
            )
        case .hello(let h):
            hello = h
            // Nothing else was sent before this answer, and the daemon sends nothing unasked after it.
            binary.store(h.wireEncoding == .binary, ordering: .releasing)
        case .failure(let f):
            close()
            throw EnclaveClientError.failure(f)
        case let other:
            close()
            throw EnclaveClientError.protocolError("\(other)")
        }
    }

    deinit { close() }

    /// Whether the connection is gone. While nobody reads, asks the kernel whether the daemon
    /// hung up (a zero-timeout poll), so a cached connection to a daemon that restarted is not reused.
    /// Linux's POLLRDHUP (the peer shut its end), which Glibc's module leaves out without _GNU_SOURCE.
    private static let pollReadHangUp: Int16 = 0x2000

    public var closed: Bool {
        state.lock()
        defer { state.unlock() }
        if isClosed || readerBusy { return isClosed }
        // A request someone waits for is pending: its reader will see the end (and read any reply
        // that came before it).
        if pending.count > discardedPending { return false }
        var p = pollfd(fd: fd, events: Self.pollReadHangUp, revents: 0)
        if poll(&p, 1, 0) == 1, p.revents & (Self.pollReadHangUp | Int16(POLLHUP | POLLERR | POLLNVAL)) != 0 {
            shutDownLocked()
            releaseDescriptorIfIdleLocked()
        }
        return isClosed
    }

    /// Sends a request; `completion` runs on the thread that reads its final reply.
    @discardableResult
    public func send(_ request: Request, onEvent: EventHandler? = nil, completion: @escaping Completion) -> UInt64 {
        let id: UInt64? = register(.callback(onEvent: onEvent, completion: completion))
        guard let id else {
            completion(.failure(.connectionLost))
            return 0
        }
        if let failure = transmit(request, id: id), case .callback(_, let completion)? = unregister(id) {
            completion(.failure(failure))
        }
        return id
    }

    /// Blocking form, for the synchronous parts of Apple's API (`canEvaluatePolicy`, `SecItem…`):
    /// the calling thread reads its own reply unless another thread is reading already.
    public func request(_ request: Request) throws -> Reply {
        let waiter = Waiter()
        guard let id = register(.blocking(waiter)) else { throw EnclaveClientError.connectionLost }
        if let failure = transmit(request, id: id) {
            _ = unregister(id)
            throw failure
        }
        state.lock()
        while waiter.result == nil {
            if readerBusy || isClosed {
                sleepers.append(waiter)
                state.unlock()
                waiter.wake.wait()
                state.lock()
                if waiter.result == nil && readerBusy { wakesForNothing += 1 }
                continue
            }
            readerBusy = true
            state.unlock()
            read(until: { waiter.result != nil })
            state.lock()
        }
        state.unlock()
        return try waiter.result!.get()
    }

    /// Sends a request whose answer nobody needs, without a thread to read it: the next reader
    /// drops the reply. Past `discardedLimit` such replies unread, the request is sent as a callback
    /// request instead, so that the connection's thread reads them out.
    public func sendDiscardingReply(_ request: Request) {
        let discarded: UInt64? = {
            state.lock()
            defer { state.unlock() }
            guard !isClosed, discardedPending < Self.discardedLimit else { return nil }
            let id = nextID
            nextID += 1
            pending[id] = .discarded
            discardedPending += 1
            return id
        }()
        guard let id = discarded else {
            send(request) { _ in }
            return
        }
        if transmit(request, id: id) != nil { _ = unregister(id) }
    }

    static let discardedLimit = 64

    /// How long the connection's thread waits for more after the last callback request was answered.
    static let lingerMilliseconds: Int32 = 200

    /// Whether the connection's own reader thread runs now (for tests).
    var readerThreadRunning: Bool { state.withLock { readerThreadStarted } }

    public func request(_ request: Request, onEvent: EventHandler? = nil) async throws -> Reply {
        try await withCheckedThrowingContinuation { continuation in
            send(request, onEvent: onEvent) { continuation.resume(with: $0) }
        }
    }

    public func close() {
        state.lock()
        shutDownLocked()
        releaseDescriptorIfIdleLocked()
        state.unlock()
    }

    /// The request's id, or nil when the connection is closed. One decision under one lock: either
    /// the request is pending (and the end of the connection will answer it) or it is refused here.
    func register(_ entry: Pending) -> UInt64? {
        state.lock()
        defer { state.unlock() }
        guard !isClosed else { return nil }
        let id = nextID
        nextID += 1
        pending[id] = entry
        if case .callback = entry {
            callbacksPending += 1
            startReaderThreadLocked()
            state.broadcast()
        }
        return id
    }

    func unregister(_ id: UInt64) -> Pending? {
        state.lock()
        defer { state.unlock() }
        return removeLocked(id)
    }

    func removeLocked(_ id: UInt64) -> Pending? {
        guard let entry = pending.removeValue(forKey: id) else { return nil }
        switch entry {
        case .callback: callbacksPending -= 1
        case .discarded: discardedPending -= 1
        case .blocking: break
        }
        return entry
    }

    /// Frames and writes the request; the error to answer it with when that failed.
    private func transmit(_ request: Request, id: UInt64) -> EnclaveClientError? {
        let frame: [UInt8]
        do { frame = try FrameEncoder.checkedFrame(RequestEnvelope(id: id, request: request).encoded(encoding)) } catch
        {
            return .protocolError("the request exceeds the \(WireLimits.maxPayloadBytes / 1024) KiB message limit")
        }
        return write(frame) ? nil : .connectionLost
    }

    private func write(_ bytes: [UInt8]) -> Bool {
        writeLock.withLock {
            // The descriptor is closed under this lock: its number may already belong to another file.
            guard !descriptorClosed else { return false }
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                offset += n
            }
            return true
        }
    }

    /// Marks the connection closed and answers every pending request with `connectionLost`.
    func shutDownLocked() {
        guard !isClosed else { return }
        isClosed = true
        shutdown(fd, Int32(SHUT_RDWR))
        let waiting = pending
        pending.removeAll()
        callbacksPending = 0
        discardedPending = 0
        var completions: [Completion] = []
        for entry in waiting.values {
            switch entry {
            case .blocking(let waiter): waiter.result = .failure(.connectionLost)
            case .callback(_, let completion): completions.append(completion)
            case .discarded: break
            }
        }
        for sleeper in sleepers { sleeper.wake.signal() }
        sleepers.removeAll()
        state.broadcast()
        // Completions may resume tasks that send again: never run them under the lock.
        if !completions.isEmpty {
            state.unlock()
            for completion in completions { completion(.failure(.connectionLost)) }
            state.lock()
        }
    }

    /// Wakes `waiter`'s thread if it sleeps.
    func wakeLocked(_ waiter: Waiter) {
        guard let i = sleepers.firstIndex(where: { $0 === waiter }) else { return }
        sleepers.remove(at: i).wake.signal()
    }

    /// The reader role is free: wakes the first sleeping thread whose reply has not come (it reads
    /// next) and the connection's own thread, whichever takes the role first.
    func wakeNextReaderLocked() {
        if let i = sleepers.firstIndex(where: { $0.result == nil }) { sleepers.remove(at: i).wake.signal() }
        state.broadcast()
    }

    /// Closes the descriptor once the connection is closed and nobody is reading it (its number
    /// may then be reused by another file).
    func releaseDescriptorIfIdleLocked() {
        guard isClosed, !readerBusy else { return }
        writeLock.withLock {
            guard !descriptorClosed else { return }
            descriptorClosed = true
            Glibc.close(fd)
        }
    }
}
