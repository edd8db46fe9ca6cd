import CPeerSocket
import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The handoff socket's loop (`Handoff`), on a thread of its own: it never runs on the event
/// loops or the cooperative pool, and it blocks only in `poll`. Non-blocking throughout: a
/// client that connects and sends nothing holds one slot of its own user's for at most
/// `Handoff.exchangeTimeout`, and at most `perUserWaiting` of them (a user's share: `ShareOwner`)
/// — it never delays another user, until `waiting` connections in all wait.
/// A handed descriptor is judged by what the kernel has cached (`la_descriptor_type`) and by
/// calls only a terminal answers, and one it does not keep is closed by `HandedDescriptorCloser`,
/// never here: a file on a FUSE mount whose server never answers is asked nothing, and its close
/// waits in that user's turn.
///
/// The loop runs with a descriptor table of its own (`la_private_descriptor_table`): what it
/// receives never enters the process's table, and a close that never ends holds nothing of the
/// daemon's; what it accepts, `HandedDescriptorForwarder` carries into the process's table.
///
/// A connection takes no descriptor until the loop says `Handoff.ready` (`la_take_descriptors`,
/// set on the listener: Linux 6.16), one connection of each user at a time, and after its one
/// message nothing more can enter it (`la_end_reading`). The kernel releases descriptors nobody
/// received with the connection, on the thread that closes it, and such a release can wait
/// without end (a FUSE file with pages its server never takes back): a connection that may
/// still hold some is closed by `HandedDescriptorCloser`, in its user's turn, never here
/// (`Holding`). Urgent data is read in line (`la_read_urgent_in_line`): a plain read may free an
/// urgent byte it meets, releasing what rode with it in the reader, or leave it uncounted.
///
/// Unchecked: a thin owner of the listening descriptor and its wake pipe. `wake`, `forwarder`
/// and `refusesUntilReady` are set by `start` before the loop's thread exists, `thread` by `start` and read only by
/// `stop` (the service that owns the server calls them in turn); the loop's own state lives on
/// its thread.
final class HandoffServer: @unchecked Sendable {
    static let perUserWaiting = 4
    static let waiting = 256

    private let listener: Int32
    private let path: String?
    /// Only root's processes may hand over (`HandoffSocketSetting.Access.rootOnly`): the socket's
    /// file lets nobody else connect; one that did before is answered at once.
    private let rootOnly: Bool
    private let registry: HandoffRegistry
    private let logger: Logger
    private let closer = HandedDescriptorCloser()
    private var wake: [Int32] = [-1, -1]
    private var forwarder: HandedDescriptorForwarder?
    private var thread: LoopThread?
    /// Whether a connection takes descriptors only once told `ready` (the kernel refuses them
    /// before: `la_take_descriptors`); false before Linux 6.16.
    private var refusesUntilReady = false

    private struct Pending {
        var fd: Int32
        var peer: HandoffTickets<HandedDescriptors>.Owner
        /// Whose turn its closes take (`PeerProcess.share`).
        var turn: UInt32
        var deadline: Double
        var holding: Holding
        /// Told `ready` (what it holds is then `.unread`): its one message is read when it comes.
        var ready: Bool { holding == .unread }
    }

    /// `path`: the file to remove when the loop stops (nil when systemd owns it).
    init(listener: Int32, path: String?, rootOnly: Bool = false, registry: HandoffRegistry, logger: Logger) {
        self.listener = listener
        self.path = path
        self.rootOnly = rootOnly
        self.registry = registry
        self.logger = logger
    }

    /// False when the loop could not start (no descriptors for its wake-up pipe or its forwarder,
    /// or no descriptor table of its own); the listener is closed then (and its file removed).
    func start() -> Bool {
        guard la_pipe_cloexec_nonblocking(&wake) == 0 else {
            closeListener()
            return false
        }
        guard let forwarder = HandedDescriptorForwarder() else {
            close(wake[0])
            close(wake[1])
            closeListener()
            return false
        }
        self.forwarder = forwarder
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
        refusesUntilReady = Self.refusesUnaskedDescriptors(listener)
        if !refusesUntilReady {
            logger.notice(
                "the kernel cannot refuse descriptors on the handoff socket (SO_PASSRIGHTS, Linux 6.16): what a client sends before it is asked is closed in its user's turn",
                metadata: ["errno": "\(errno)"]
            )
        }
        let keep = Array(Set([STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, listener, wake[0], forwarder.loopEnd]))
            .sorted()
        let separation = Separation()
        let thread = LoopThread(name: "la-handoff") { [self] in
            let own = keep.withUnsafeBufferPointer { la_private_descriptor_table($0.baseAddress, Int32($0.count)) } == 0
            let failure = errno
            separation.own.withLock { $0 = own }
            separation.done.signal()
            guard own else {
                logger.error("the handoff socket has no descriptor table of its own", metadata: ["errno": "\(failure)"])
                return
            }
            loop()
        }
        separation.done.wait()
        // The loop's descriptors are in its own table now (or it has ended): the process's copies go.
        close(wake[0])
        forwarder.loopHasItsOwn()
        guard separation.own.withLock({ $0 }) else {
            thread.join()
            close(wake[1])
            forwarder.stop()
            closeListener()
            return false
        }
        close(listener)
        self.thread = thread
        return true
    }

    /// Ends the loop and waits for it (it closes the listener in its own table); removes the
    /// listener's file when it made it. A loop that does not end within 2 s (held in a release the
    /// kernel makes it do: see "Handing the terminal over") is left behind with its receiver: it
    /// holds nothing but its own table, and the daemon stops all the same.
    func stop() {
        guard let thread else { return }
        var one: UInt8 = 1
        _ = write(wake[1], &one, 1)
        self.thread = nil
        if let path { unlink(path) }
        guard thread.join(within: 2) else {
            logger.error("the handoff socket's loop did not end; left behind")
            return
        }
        close(wake[1])
        forwarder?.stop()
    }

    /// Whether the loop's thread has its own descriptor table, told once.
    private final class Separation: Sendable {
        let own = Mutex(false)
        let done = DispatchSemaphore(value: 0)
    }

    private func closeListener() {
        close(listener)
        if let path { unlink(path) }
    }

    private func loop() {
        var pending: [Pending] = []
        /// Out of descriptors, the listener stays readable: it is left alone for a moment instead
        /// of spinning on EMFILE.
        var acceptPausedUntil = 0.0
        defer {
            // In the loop's own table: the process's copies are gone already.
            for waiting in pending { finish(waiting.fd, of: waiting.turn, waiting.holding) }
            close(listener)
            close(wake[0])
            if let forwarder { close(forwarder.loopEnd) }
        }
        while true {
            let now = monotonicSeconds()
            pending.removeAll { p in
                guard p.deadline <= now else { return false }
                // Told ready and silent: not a ticket; still waiting its turn: busy.
                answer(p.fd, p.ready ? .malformed : .busy, of: p.turn, p.holding)
                return true
            }
            offerReady(&pending)
            let listening = now >= acceptPausedUntil
            var fds = [
                pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0),
                pollfd(fd: listening ? listener : -1, events: Int16(POLLIN), revents: 0),
            ]
            // One still waiting its turn is not read (nothing it sends is taken before ready).
            fds += pending.map { pollfd(fd: $0.fd, events: $0.ready ? Int16(POLLIN) : 0, revents: 0) }
            let wakeUps = pending.map(\.deadline) + (listening ? [] : [acceptPausedUntil])
            let timeout = wakeUps.min().map { Int32(max(1, ($0 - now) * 1000)) } ?? -1
            let n = poll(&fds, nfds_t(fds.count), timeout)
            if n < 0 && errno != EINTR {
                logger.error("the handoff socket failed", metadata: ["errno": "\(errno)"])
                // Nobody accepts from now: a ticket would send a client to wait for nothing, and a
                // file of ours would too.
                registry.serve(.nobody(why: "its handoff socket's loop failed (see the daemon's log)"))
                if let path { unlink(path) }
                return
            }
            if fds[0].revents != 0 { return }
            var done: Set<Int32> = []
            for (index, p) in pending.enumerated() where fds[index + 2].revents != 0 {
                if p.ready {
                    if exchange(p) { done.insert(p.fd) }
                } else {
                    // Hung up while waiting its turn.
                    finish(p.fd, of: p.turn, p.holding)
                    done.insert(p.fd)
                }
            }
            pending.removeAll { done.contains($0.fd) }
            if fds[1].revents & Int16(POLLIN) != 0, !acceptAll(into: &pending) {
                acceptPausedUntil = monotonicSeconds() + 0.1
            }
        }
    }

    /// False when the process is out of descriptors.
    private func acceptAll(into pending: inout [Pending]) -> Bool {
        while true {
            let fd = la_accept_cloexec_nonblocking(listener)
            guard fd >= 0 else { return errno != EMFILE && errno != ENFILE }
            // Before anything is read (a plain read of urgent data may release what rode with it).
            guard la_read_urgent_in_line(fd) == 0 else {
                finish(fd, of: .max, .unasked)
                continue
            }
            // What may have come unasked: nothing where the kernel refuses descriptors on it.
            let holding: Holding = refusesUntilReady && la_takes_descriptors(fd) == 0 ? .nothing : .unasked
            guard let credentials = PeerCredentials.of(socket: fd) else {
                finish(fd, of: .max, holding)
                continue
            }
            let peer = HandoffTickets<HandedDescriptors>.Owner(uid: credentials.uid, pid: credentials.pid)
            // The ranges as last read: reading them again may ask the account database, whose
            // cached descriptors this loop's table of its own must not meet.
            let share = PeerProcess.share(
                uid: credentials.uid,
                pid: credentials.pid,
                subordinates: SubordinateIDFile.system.lastRead
            )
            guard !rootOnly || credentials.uid == 0 else {
                answer(fd, .rootOnly, of: share, holding)
                continue
            }
            guard pending.count < Self.waiting, pending.filter({ $0.turn == share }).count < Self.perUserWaiting
            else {
                answer(fd, .busy, of: share, holding)
                continue
            }
            pending.append(
                Pending(
                    fd: fd,
                    peer: peer,
                    turn: share,
                    deadline: monotonicSeconds() + Handoff.exchangeTimeout,
                    holding: holding
                )
            )
        }
    }

    /// Tells `ready` to the first connection of each user that has none told yet: one message
    /// of a user's at a time may bring descriptors, and only while the user's closes under way
    /// are fewer than `HandedDescriptorCloser.heldPerUser` (else busy, before anything may be
    /// sent).
    private func offerReady(_ pending: inout [Pending]) {
        var told = Set(pending.filter(\.ready).map(\.turn))
        var index = 0
        while index < pending.count {
            let p = pending[index]
            guard !p.ready, !told.contains(p.turn) else {
                index += 1
                continue
            }
            var ready = Handoff.ready
            guard closer.takesMore(from: p.turn) else {
                logger.notice(
                    "refused a handoff",
                    metadata: ["uid": "\(p.peer.uid)", "pid": "\(p.peer.pid)", "why": "closing"]
                )
                answer(p.fd, .busy, of: p.turn, p.holding)
                pending.remove(at: index)
                continue
            }
            guard !refusesUntilReady || la_take_descriptors(p.fd, 1) == 0,
                send(p.fd, &ready, 1, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) == 1
            else {
                finish(p.fd, of: p.turn, .unread)
                pending.remove(at: index)
                continue
            }
            pending[index].holding = .unread
            // Its own time for the message, from now: its wait for its turn was not its doing.
            pending[index].deadline = monotonicSeconds() + Handoff.exchangeTimeout
            told.insert(p.turn)
            index += 1
        }
    }

    /// The one message: the ticket's bytes with exactly one descriptor. False when there was
    /// nothing to read after all (it stays pending until its deadline).
    private func exchange(_ p: Pending) -> Bool {
        var bytes = [UInt8](repeating: 0, count: Handoff.ticketBytes + 1)
        // Room for all one message can carry: the shim would close the rest itself, here. (The
        // kernel also releases in the reader what it cannot hand over: a descriptor a security
        // module refuses, or room taken by credentials, which this socket never asks for.)
        var received = [Int32](repeating: -1, count: Int(la_most_descriptors))
        var count: Int32 = 0
        let n = la_receive_with_descriptors(p.fd, &bytes, bytes.count, &received, Int32(received.count), &count)
        if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return false }
        let descriptor: Int32? = count == 1 ? received[0] : nil
        let status: HandoffStatus
        if count > 1 {
            for fd in received.prefix(Int(count)) where fd >= 0 { closer.close(fd, of: p.turn) }
            status = .malformed
        } else if n != Handoff.ticketBytes {
            if let descriptor { closer.close(descriptor, of: p.turn) }
            status = .malformed
        } else if let descriptor {
            status = deliver(descriptor, ticket: Data(bytes.prefix(Handoff.ticketBytes)), peer: p.peer)
            // Taken or not, this copy is the loop's (a taken one has its own in the process's table).
            closer.close(descriptor, of: p.turn)
        } else {
            // The ticket is spent either way: whoever sent it gets no second try.
            _ = registry.redeem(Data(bytes.prefix(Handoff.ticketBytes)), by: p.peer)
            status = .noDescriptor
        }
        if status != .accepted {
            logger.notice(
                "refused a handoff",
                metadata: ["uid": "\(p.peer.uid)", "pid": "\(p.peer.pid)", "why": "\(status)"]
            )
        }
        answer(p.fd, status, of: p.turn, p.holding)
        return true
    }

    /// Whether `descriptor` is taken (a copy of it, in the process's table); the caller closes this
    /// one either way (`HandedDescriptorCloser`).
    private func deliver(
        _ descriptor: Int32,
        ticket: Data,
        peer: HandoffTickets<HandedDescriptors>.Owner
    ) -> HandoffStatus {
        let redeemed: HandoffTickets<HandedDescriptors>.Redeemed
        switch registry.redeem(ticket, by: peer) {
        case .failure(let status): return status
        case .success(let ticket): redeemed = ticket
        }
        let type = mode_t(bitPattern: la_descriptor_type(descriptor))
        switch redeemed.kind {
        case .terminal:
            // A terminal is a character device: anything else is refused before `isatty`, which a
            // file on FUSE would send to its server.
            guard type == Glibc.S_IFCHR, isatty(descriptor) == 1 else { return .notATerminal }
            // The terminal the process runs in, not any terminal it can open: the kernel's
            // tty_nr for the peer against the descriptor's device.
            let stat = (try? String(contentsOfFile: "/proc/\(peer.pid)/stat", encoding: .utf8)) ?? ""
            guard let controlling = TerminalDevice.controllingTerminal(stat: stat),
                controlling == TerminalDevice(ttyNr: Int64(la_terminal_device(descriptor)))
            else {
                return .notTheControllingTerminal
            }
        case .secretInput:
            // A pipe only: reading it, and its last close, ask no file system. A file's lines come
            // through a pipe the client library fills (`handOverSecretInput`).
            guard type == Glibc.S_IFIFO else { return .notAPipe }
        }
        switch forwarder?.forward(redeemed.kind, descriptor, to: redeemed.destination) {
        case .taken: return .accepted
        case .connectionEnded: return .unknownTicket
        case .notCarried, nil: return .busy
        }
    }

    private func answer(_ fd: Int32, _ status: HandoffStatus, of share: UInt32, _ holding: Holding) {
        var byte = status.rawValue
        _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
        finish(fd, of: share, holding)
    }

    /// Closes a connection of `share`'s: here, once nothing can enter it and nothing it holds
    /// could make the close wait (`Holding`); else in the user's turn (`HandedDescriptorCloser`),
    /// where the kernel's release of what it holds may wait.
    private func finish(_ fd: Int32, of share: UInt32, _ holding: Holding) {
        let mayWait: Bool
        switch holding {
        case .nothing: mayWait = false
        case .unread: mayWait = la_end_reading(fd, 0) != 0
        case .unasked: mayWait = ![0, 2].contains(la_end_reading(fd, 1))
        }
        if mayWait { closer.close(fd, of: share) } else { close(fd) }
    }

    private func monotonicSeconds() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
}
