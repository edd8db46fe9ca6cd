import CPeerSocket
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A deadline for the blocking system calls one thread makes on a descriptor a client shares with
/// the daemon (a handed terminal or pipe): `O_NONBLOCK`, which the daemon sets, belongs to the open
/// file description, so such a client can clear it and then keep a `write` or `read` blocked for
/// as long as it likes. Once the deadline passes, the thread is sent `SIGURG` every 10 ms until its
/// body returns: a blocked call returns (EINTR, or what it had done), and the body sees no time
/// left.
///
/// `SIGURG`, because the kernel sends it only to the owner of a socket with urgent data (the
/// daemon owns none) and ignores it by default (Go's runtime picks it for the same reasons). Its
/// handler does nothing and is installed without `SA_RESTART`. The thread is signalled only while
/// its body runs (the release and the signal take one lock), and blocks `SIGURG` again when it
/// ends, so a signal still on its way is held there and cannot cut another call short. Our choice:
/// used only on threads of the daemon's own (`LoopThread`, `SerialThread`), whose every call in
/// such a body handles EINTR.
enum SystemCallDeadline {
    /// How often a thread past its deadline is signalled again: a signal sent just before the
    /// thread entered its call finds it not yet blocked.
    static let repeatInterval: Double = 0.01

    private static let handlerInstalled = la_install_interrupting_handler(SIGURG) == 0

    /// Runs `body`, which is told the seconds left (zero or less once the deadline has passed),
    /// and interrupts its blocking calls from `seconds` on.
    static func run<T>(within seconds: Double, _ body: (_ left: () -> Double) -> T) -> T {
        let end = DispatchTime.now().uptimeNanoseconds &+ UInt64(min(max(0, seconds), 1e9) * 1e9)
        let left = { Double(Int64(bitPattern: end &- DispatchTime.now().uptimeNanoseconds)) / 1e9 }
        guard handlerInstalled else { return body(left) }
        var urgent = sigset_t()
        sigemptyset(&urgent)
        sigaddset(&urgent, SIGURG)
        pthread_sigmask(SIG_UNBLOCK, &urgent, nil)
        let target = SignalledThread(pthread_self())
        let first = Deadline(after: seconds) { target.interrupt() }
        defer {
            target.release()
            pthread_sigmask(SIG_BLOCK, &urgent, nil)
            first.cancel()
        }
        return body(left)
    }
}

/// The thread a deadline signals, until it is released.
private final class SignalledThread: Sendable {
    private let thread: Mutex<pthread_t?>

    init(_ thread: pthread_t) { self.thread = Mutex(thread) }

    /// Signals the thread and again after `repeatInterval`, unless it has been released.
    func interrupt() {
        let signalled = thread.withLock { thread -> Bool in
            guard let thread else { return false }
            pthread_kill(thread, SIGURG)
            return true
        }
        if signalled { _ = Deadline(after: SystemCallDeadline.repeatInterval) { self.interrupt() } }
    }

    func release() { thread.withLock { $0 = nil } }
}
