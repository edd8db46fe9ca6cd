import CPeerSocket
import EnclaveCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's side of the helper: one request and its answer at a time, each answer matched to
/// its request by sequence. A helper that is gone is fatal to the daemon (`onGone`): it would
/// refuse every client until restarted, so it stops and lets its supervisor start both again.
public final class PeerHelperClient: Sendable {
    private let socket: Int32
    /// One exchange on the socket at a time, waited for at most the answer's deadline.
    private let turn = DispatchSemaphore(value: 1)
    private struct Exchanges {
        var sequence: UInt64 = 0
        /// Releases that could not be sent yet (the helper's queue was full): sent before the next request.
        var pendingReleases: [UInt64] = []
    }
    private let exchanges = Mutex(Exchanges())
    private let onGone: @Sendable () -> Void
    /// Whether a holders scan is under way (`ptyHolders`).
    private let scanning = Atomic(false)
    /// How long an answer may take, its turn on the socket included; a slower one refuses that
    /// client (and is dropped when it comes).
    static let timeout: Double = 1

    private enum Sent { case sent, full, gone }

    public init(socket: Int32, onGone: @escaping @Sendable () -> Void = PeerHelperClient.stopTheDaemon) {
        self.socket = socket
        self.onGone = onGone
        _ = fcntl(socket, F_SETFD, FD_CLOEXEC)
        // Blocking, but never for longer than the answer may take.
        var limit = timeval(tv_sec: 1, tv_usec: 0)
        _ = setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

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
        let status = PeerHelper.read(answer, 0, Int32.self)
        guard status == 0 else {
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
    /// nil when it could not say (another scan under way, too slow, too many, gone). One scan at a
    /// time for the whole daemon: each holds the helper for up to `PtyMasterHolders.budget`, and
    /// pins of every user wait behind it.
    /// `only`: whether that process alone holds it (its descriptors alone are read).
    /// A one-process look is short: it waits its turn on the socket like a pin, never refused for
    /// another scan under way (a user's administration would otherwise take a sudo's finger).
    func ptyHolders(index: UInt32, only: Int32? = nil) -> [TerminalHolders.Holder]? {
        if only == nil {
            guard !scanning.exchange(true, ordering: .acquiringAndReleasing) else { return nil }
        }
        defer { if only == nil { scanning.store(false, ordering: .releasing) } }
        guard let answer = exchange(.holders, pid: only ?? 0, handle: UInt64(index)),
            PeerHelper.read(answer, 0, Int32.self) == 0,
            answer.count == PeerHelper.headerSize + Int(PeerHelper.read(answer, 25, UInt16.self))
        else { return nil }
        return PeerHelper.holders(from: answer[PeerHelper.headerSize...])
    }

    func executableChanged(_ handle: UInt64) -> Bool {
        guard let answer = exchange(.check, handle: handle) else { return true }
        return PeerHelper.read(answer, 0, Int32.self) != 0
    }

    func release(_ handle: UInt64) {
        turn.wait()
        let gone: Bool
        switch sendRequest(.release, handle: handle) {
        case .sent: gone = false
        case .full:
            exchanges.withLock { $0.pendingReleases.append(handle) }
            gone = false
        case .gone: gone = true
        }
        turn.signal()
        if gone { onGone() }
    }

    /// The answer to this request, or nil (refused: too slow, or the helper is gone).
    private func exchange(
        _ operation: PeerHelper.Operation,
        pid: Int32 = 0,
        handle: UInt64 = 0,
        cookie: UInt64 = 0,
        descriptor: Int32? = nil
    ) -> [UInt8]? {
        // The wait for the helper counts: the deadline starts before the lock.
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(Self.timeout * 1e9)
        guard turn.wait(timeout: .now() + Self.timeout) == .success else { return nil }
        var gone = false
        let answer = { () -> [UInt8]? in
            releasing: while let waiting = exchanges.withLock({ $0.pendingReleases.first }) {
                switch sendRequest(.release, handle: waiting) {
                case .sent: exchanges.withLock { _ = $0.pendingReleases.removeFirst() }
                case .full: break releasing
                case .gone:
                    gone = true
                    return nil
                }
            }
            let mine = exchanges.withLock { exchanges in
                exchanges.sequence += 1
                return exchanges.sequence
            }
            switch sendRequest(
                operation,
                pid: pid,
                handle: handle,
                cookie: cookie,
                sequence: mine,
                descriptor: descriptor
            ) {
            case .sent: break
            case .full: return nil
            case .gone:
                gone = true
                return nil
            }
            var buffer = [UInt8](repeating: 0, count: PeerHelper.maxAnswer)
            while true {
                let now = DispatchTime.now().uptimeNanoseconds
                guard now < deadline else { return nil }
                var ready = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
                let polled = poll(&ready, 1, Int32((deadline - now) / 1_000_000) + 1)
                if polled < 0 {
                    if errno == EINTR {
                        continue
                    } else {
                        gone = true
                        return nil
                    }
                }
                if polled == 0 { continue }
                let n = recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                let code = errno
                if n == 0 || (n < 0 && code != EAGAIN && code != EINTR) {
                    gone = true
                    return nil
                }
                guard n >= PeerHelper.headerSize else { continue }
                let answer = Array(buffer[..<n])
                if PeerHelper.read(answer, 16, UInt64.self) == mine { return answer }
                // A late answer to an earlier request: a peer pinned for nobody is released.
                if PeerHelper.read(answer, 0, Int32.self) == 0, PeerHelper.read(answer, 8, UInt64.self) != 0,
                    answer.count > PeerHelper.headerSize
                {
                    let stale = PeerHelper.read(answer, 8, UInt64.self)
                    if case .full = sendRequest(.release, handle: stale) {
                        exchanges.withLock { $0.pendingReleases.append(stale) }
                    }
                }
            }
        }()
        turn.signal()
        if gone { onGone() }
        return answer
    }

    /// One request; its errno read where it happened.
    private func sendRequest(
        _ operation: PeerHelper.Operation,
        pid: Int32 = 0,
        handle: UInt64 = 0,
        cookie: UInt64 = 0,
        sequence: UInt64 = 0,
        descriptor: Int32? = nil
    ) -> Sent {
        let bytes = PeerHelper.request(operation, pid: pid, handle: handle, cookie: cookie, sequence: sequence)
        return bytes.withUnsafeBytes { raw -> Sent in
            var n: Int
            var code: Int32
            repeat {
                n =
                    descriptor.map { la_send_with_descriptor(socket, raw.baseAddress, raw.count, $0) }
                    ?? send(socket, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL))
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

    /// Proven by the helper when it pinned the peer, right after reading its executable.
    func confirmHolds(connectionCookie cookie: UInt64) throws(PeerProcess.Refusal) {}
}
