import CPeerSocket
import EnclaveCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's side of the helper: any thread sends a request and waits for its own answer, which
/// a reader thread of the client's hands it by sequence (the helper answers pins and scans as they
/// end, not in turn: `PeerHelper.serve`). A helper that is gone is fatal to the daemon (`onGone`): it
/// would refuse every client until restarted, so it stops and lets its supervisor start both again.
public final class PeerHelperClient: Sendable {
    /// What the client shares with its reader thread, which outlives neither.
    private final class Shared: Sendable {
        let socket: Int32
        let onGone: @Sendable () -> Void
        let exchanges = Mutex(Exchanges())
        let sent = Atomic(0)
        let latePinsReleased = Atomic(0)
        /// Signalled when the reader thread has returned: it reads the socket no more.
        let readerEnded = DispatchSemaphore(value: 0)

        init(socket: Int32, onGone: @escaping @Sendable () -> Void) {
            self.socket = socket
            self.onGone = onGone
        }
    }

    /// One request waiting for its answer.
    private final class Waiter: Sendable {
        let woken = DispatchSemaphore(value: 0)
        /// Set by the reader before it wakes the waiter; nil when the helper is gone.
        let answer = Mutex<[UInt8]?>(nil)
    }

    private struct Exchanges {
        var sequence: UInt64 = 0
        var waiting: [UInt64: Waiter] = [:]
        /// Releases that could not be sent yet (the helper's queue was full): sent before the next request.
        var pendingReleases: [UInt64] = []
        /// The helper's end closed (or the client's own, `closing`): nothing more is sent.
        var gone = false
        var closing = false
    }

    private let shared: Shared
    /// Whether a holders scan is under way (`ptyHolders`).
    private let scanning = Atomic(false)
    /// How long an answer may take; a slower one refuses that client (and is dropped when it comes).
    static let timeout: Double = 1

    private enum Sent { case sent, full, gone }

    public init(socket: Int32, onGone: @escaping @Sendable () -> Void = PeerHelperClient.stopTheDaemon) {
        shared = Shared(socket: socket, onGone: onGone)
        _ = fcntl(socket, F_SETFD, FD_CLOEXEC)
        // Blocking, but never for longer than the answer may take.
        var limit = timeval(tv_sec: 1, tv_usec: 0)
        _ = setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let shared = self.shared
        startThread(named: "la-peer-answers") {
            Self.readAnswers(shared)
            shared.readerEnded.signal()
        }
    }

    /// The reader stops without calling `onGone` (tests make a client per helper), and is waited
    /// for: once this returns, nothing of the client's reads or writes the socket, which its owner
    /// may then close.
    deinit {
        shared.exchanges.withLock { $0.closing = true }
        shutdown(shared.socket, Int32(SHUT_RDWR))
        shared.readerEnded.wait()
    }

    /// Requests sent so far that ask for an answer, answered or not (tests: a request is on its way).
    var requestsSent: Int { shared.sent.load(ordering: .acquiring) }
    /// Peers pinned for requests that had given up, released when their answer came (tests).
    var latePinsReleased: Int { shared.latePinsReleased.load(ordering: .acquiring) }

    private static let stopped = Atomic(false)

    /// Once, whichever thread sees it first: a line to standard error and `_exit(70)` (no exit
    /// handlers racing other threads).
    public static let stopTheDaemon: @Sendable () -> Void = {
        let first = !stopped.exchange(true, ordering: .acquiringAndReleasing)
        guard first else { return }
        let line = Array(
            "laenclaved: its privileged helper is gone: stopping (the service manager starts both again)\n".utf8
        )
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        _exit(70)
    }

    /// Pins the peer `pid` (with its pidfd when the kernel gave one) and proves it holds the
    /// connection whose daemon end has `cookie`.
    func pin(pid: Int32, pidfd: Int32?, cookie: UInt64) throws(PeerProcess.Refusal) -> HelperPinnedPeer {
        guard let answer = exchange(.pin, pid: pid, cookie: cookie, descriptor: pidfd) else {
            throw .unreadable(ETIMEDOUT)
        }
        let status = PeerHelper.status(of: answer)
        guard status == .ok else {
            throw PeerHelper.refusal(status: status, errno: PeerHelper.read(answer, 4, Int32.self))
        }
        guard let peer = peer(from: answer) else {
            release(PeerHelper.read(answer, 8, UInt64.self))
            throw .unreadable(EPROTO)
        }
        return peer
    }

    private func peer(from answer: [UInt8]) -> HelperPinnedPeer? {
        let kind = Int(answer[24])
        let nameLength = Int(PeerHelper.read(answer, 25, UInt16.self))
        let sessionLength = PeerHelper.read(answer, 27, UInt16.self)
        let placeLength = sessionLength == .max ? 0 : Int(sessionLength)
        guard kind < PeerHelper.kinds.count, nameLength > 0,
            answer.count == PeerHelper.headerSize + nameLength + placeLength
        else { return nil }
        let name = String(decoding: answer[PeerHelper.headerSize..<(PeerHelper.headerSize + nameLength)], as: UTF8.self)
        let session =
            sessionLength == .max
            ? nil : String(decoding: answer[(PeerHelper.headerSize + nameLength)...], as: UTF8.self)
        return HelperPinnedPeer(
            client: self,
            handle: PeerHelper.read(answer, 8, UInt64.self),
            identity: AppIdentity(name: name, kind: PeerHelper.kinds[kind]),
            session: session
        )
    }

    /// The holders of the master of `/dev/pts/index`, as the helper reads them with its capabilities;
    /// nil when it could not say (another scan under way, too slow, too many, gone). One full scan
    /// at a time for the whole daemon: each takes one of the helper's workers for up to
    /// `PtyMasterHolders.budget`.
    /// `only`: whether that process alone holds it (its descriptors alone are read).
    /// A one-process look is short: it is sent like a pin, never refused for another scan under
    /// way (a user's administration would otherwise take a sudo's finger).
    func ptyHolders(index: UInt32, only: Int32? = nil) -> [TerminalHolders.Holder]? {
        if only == nil {
            guard !scanning.exchange(true, ordering: .acquiringAndReleasing) else { return nil }
        }
        defer { if only == nil { scanning.store(false, ordering: .releasing) } }
        guard let answer = exchange(.holders, pid: only ?? 0, handle: UInt64(index)),
            PeerHelper.status(of: answer) == .ok,
            answer.count == PeerHelper.headerSize + Int(PeerHelper.read(answer, 25, UInt16.self))
        else { return nil }
        return PeerHelper.holders(from: answer[PeerHelper.headerSize...])
    }

    func executableChanged(_ handle: UInt64) -> Bool {
        guard let answer = exchange(.check, handle: handle) else { return true }
        return PeerHelper.status(of: answer) != .ok
    }

    func release(_ handle: UInt64) {
        Self.release(handle, shared)
    }

    /// Sent without waiting (it may be asked on an event loop): a full queue keeps it for later.
    private static func release(_ handle: UInt64, _ shared: Shared) {
        switch send(.release, handle: handle, on: shared.socket, waiting: false) {
        case .sent: break
        case .full: shared.exchanges.withLock { $0.pendingReleases.append(handle) }
        case .gone: lost(shared)
        }
    }

    /// The answer to this request, or nil (refused: too slow, or the helper is gone).
    private func exchange(
        _ operation: PeerHelper.Operation,
        pid: Int32 = 0,
        handle: UInt64 = 0,
        cookie: UInt64 = 0,
        descriptor: Int32? = nil
    ) -> [UInt8]? {
        // The deadline covers the send (blocking up to SO_SNDTIMEO when the helper's queue is full).
        let deadline = DispatchTime.now() + Self.timeout
        let waiter = Waiter()
        let (mine, releases) = shared.exchanges.withLock { exchanges -> (UInt64?, [UInt64]) in
            guard !exchanges.gone else { return (nil, []) }
            exchanges.sequence += 1
            exchanges.waiting[exchanges.sequence] = waiter
            defer { exchanges.pendingReleases = [] }
            return (exchanges.sequence, exchanges.pendingReleases)
        }
        guard let mine else { return nil }
        for handle in releases { Self.release(handle, shared) }
        let sent = Self.send(
            operation,
            pid: pid,
            handle: handle,
            cookie: cookie,
            sequence: mine,
            descriptor: descriptor,
            on: shared.socket
        )
        guard case .sent = sent else {
            shared.exchanges.withLock { _ = $0.waiting.removeValue(forKey: mine) }
            if case .gone = sent { Self.lost(shared) }
            return nil
        }
        shared.sent.add(1, ordering: .releasing)
        if waiter.woken.wait(timeout: deadline) == .timedOut {
            // Given up, unless the reader took the answer in the meantime: it then wakes this soon.
            guard shared.exchanges.withLock({ $0.waiting.removeValue(forKey: mine) }) == nil else { return nil }
            waiter.woken.wait()
        }
        return waiter.answer.withLock { $0 }
    }

    /// The reader thread: each answer to its waiter; a late pin's peer released (pinned for nobody).
    private static func readAnswers(_ shared: Shared) {
        var buffer = [UInt8](repeating: 0, count: PeerHelper.maxAnswer)
        while true {
            let n = recv(shared.socket, &buffer, buffer.count, 0)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                lost(shared)
                return
            }
            guard n >= PeerHelper.headerSize else { continue }
            let answer = Array(buffer[..<n])
            let sequence = PeerHelper.read(answer, 16, UInt64.self)
            if let waiter = shared.exchanges.withLock({ $0.waiting.removeValue(forKey: sequence) }) {
                waiter.answer.withLock { $0 = answer }
                waiter.woken.signal()
            } else if PeerHelper.status(of: answer) == .ok, PeerHelper.read(answer, 8, UInt64.self) != 0,
                answer.count > PeerHelper.headerSize
            {
                release(PeerHelper.read(answer, 8, UInt64.self), shared)
                shared.latePinsReleased.add(1, ordering: .releasing)
            }
        }
    }

    /// The helper's end is gone: every waiter is woken with no answer, nothing more is sent, and the
    /// daemon is told (unless the client itself closed). Told under the lock, before `gone` shows:
    /// a request refused for it never returns before the daemon knows (the reader and a failed
    /// send may find the loss at once, and the one that tells is not always the one refused).
    private static func lost(_ shared: Shared) {
        let waiters = shared.exchanges.withLock { exchanges in
            defer {
                exchanges.gone = true
                exchanges.waiting = [:]
            }
            if !exchanges.gone && !exchanges.closing { shared.onGone() }
            return Array(exchanges.waiting.values)
        }
        for waiter in waiters { waiter.woken.signal() }
    }

    /// One request; its errno read where it happened. `waiting`: false, never blocks (`MSG_DONTWAIT`).
    private static func send(
        _ operation: PeerHelper.Operation,
        pid: Int32 = 0,
        handle: UInt64 = 0,
        cookie: UInt64 = 0,
        sequence: UInt64 = 0,
        descriptor: Int32? = nil,
        on socket: Int32,
        waiting: Bool = true
    ) -> Sent {
        let bytes = PeerHelper.request(operation, pid: pid, handle: handle, cookie: cookie, sequence: sequence)
        let flags = Int32(MSG_NOSIGNAL) | (waiting ? 0 : Int32(MSG_DONTWAIT))
        return bytes.withUnsafeBytes { raw -> Sent in
            var n: Int
            var code: Int32
            repeat {
                n =
                    descriptor.map { la_send_with_descriptor(socket, raw.baseAddress, raw.count, $0) }
                    ?? Glibc.send(socket, raw.baseAddress, raw.count, flags)
                code = errno
            } while n < 0 && code == EINTR
            if n == raw.count { return .sent }
            return n < 0 && (code == EAGAIN || code == EWOULDBLOCK) ? .full : .gone
        }
    }
}

/// A peer pinned by the helper: the daemon holds its handle, the helper the process.
final class HelperPinnedPeer: PinnedPeer {
    private let client: PeerHelperClient
    let handle: UInt64
    let identity: AppIdentity
    let session: String?

    init(client: PeerHelperClient, handle: UInt64, identity: AppIdentity, session: String?) {
        self.client = client
        self.handle = handle
        self.identity = identity
        self.session = session
    }

    deinit { client.release(handle) }

    func executableChanged() -> Bool { client.executableChanged(handle) }
}
