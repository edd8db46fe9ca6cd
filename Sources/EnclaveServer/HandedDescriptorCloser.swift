import EnclaveCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Closes what a client handed over and the daemon does not keep (a refused handoff's
/// descriptors, and a handoff connection that still holds bytes nobody read, with whatever
/// descriptors rode with them), each user's in turn, on threads of their own.
///
/// A close can wait without end: a file on a FUSE mount waits for its server to answer FLUSH, and
/// no signal ends that wait, not even SIGKILL; a serial line waits for its output to drain. On
/// the handoff socket's one thread such a close held every user's handoffs. Its threads are the
/// handoff loop's, in the loop's own descriptor table (`HandedDescriptorForwarder` says why).
/// - Each user's closes run `perUser` at a time, in the order they came (`TurnsPerUser`, root's
///   by who logged in); another user's run beside them.
/// - A user with `heldPerUser` descriptors closing or waiting to close hands over no more: the
///   handoff socket answers "busy" before it lets anything be sent (`Handoff.ready`, told to one
///   connection of a user's at a time). So one user's closes that never end hold `perUser`
///   threads and fewer than `heldPerUser` + 253 descriptors (one message's most) + its connection,
///   in the handoff loop's table, and nothing of anyone else's. Before Linux 6.16, where the
///   kernel cannot refuse descriptors, also each connection of theirs answered busy with
///   descriptors sent unasked (`HandoffServer.Holding`): a count only the sender's own limit of
///   descriptors in flight bounds (docs/architecture.md, "Handing the terminal over").
final class HandedDescriptorCloser: Sendable {
    static let perUser = 2
    static let heldPerUser = 8

    private let turns = Mutex(TurnsPerUser<Int32>(atOnce: perUser))
    private let closing: @Sendable (Int32) -> Void

    /// `closing`: what closes one descriptor (tests hold it).
    init(closing: @escaping @Sendable (Int32) -> Void = { _ = Glibc.close($0) }) {
        self.closing = closing
    }

    /// Takes ownership of `fd`, handed by `user` (a `ShareOwner`), and closes it in that user's turn.
    func close(_ fd: Int32, of user: UInt32) {
        if let now = turns.withLock({ $0.arrive(user, fd) }) { start(now, of: user) }
    }

    /// Whether `user` may hand over another descriptor.
    func takesMore(from user: UInt32) -> Bool {
        turns.withLock { $0.underWay(of: user) < Self.heldPerUser }
    }

    /// Descriptors of `user`'s closing or waiting (tests).
    func underWay(of user: UInt32) -> Int { turns.withLock { $0.underWay(of: user) } }

    private func start(_ fd: Int32, of user: UInt32) {
        // The thread closes the user's next descriptors while they come: the turn stays its own.
        startThread(named: "la-close-fd") { [self] in
            var next: Int32? = fd
            while let fd = next {
                closing(fd)
                next = turns.withLock { $0.ended(user) }
            }
        }
    }
}
