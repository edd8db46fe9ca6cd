import CPeerSocket
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Ends the blocking system calls one thread makes on a descriptor a client shares with the
/// daemon (a handed terminal or pipe), at a deadline or when another thread asks: `O_NONBLOCK`,
/// which the daemon sets, belongs to the open file description, so such a client can clear it and
/// then keep a `write`, `read` or `poll` blocked for as long as it likes. Once interrupted, the
/// thread is sent `SIGURG` every 10 ms until its body returns: a blocked call returns (EINTR, or
/// what it had done), and the body sees no time left.
///
/// `SIGURG`, because the kernel sends it only to the owner of a socket with urgent data (the
/// daemon owns none) and ignores it by default (Go's runtime picks it for the same reasons). Its
/// handler does nothing and is installed without `SA_RESTART`. The thread is signalled only while
/// a body runs (the body's end and the signal take one lock), and blocks `SIGURG` again when it
/// ends, so a signal still on its way is held there and cannot cut another call short. Our choice:
/// used only on threads of the daemon's own (`LoopThread`, `SerialThread`), and a body makes only
/// the blocking calls, each of which handles EINTR (what it calls back runs outside).
final class SystemCallInterruption: Sendable {
    /// How often an interrupted thread is signalled again: a signal sent just before the thread
    /// entered its call finds it not yet blocked.
    static let repeatInterval: Double = 0.01

    /// False where the handler could not be installed: bodies then run with no interruption (the
    /// daemon logs it at start).
    static let isAvailable = la_install_interrupting_handler(SIGURG) == 0

    private struct State {
        /// The thread running a body, while it does.
        var thread: pthread_t?
        var interrupted = false
    }
    private let state = Mutex(State())

    init() {}

    /// Runs `body` on this thread (one body at a time), telling it the seconds left: none once
    /// interrupted, by `interrupt()` or `seconds` after the start (nil: no deadline).
    func run<T>(within seconds: Double? = nil, _ body: (_ left: () -> Double) -> T) -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        let left = { [self] () -> Double in
            guard !isInterrupted else { return 0 }
            guard let seconds else { return .infinity }
            return seconds - Double(DispatchTime.now().uptimeNanoseconds &- start) / 1e9
        }
        guard Self.isAvailable else { return body(left) }
        var urgent = sigset_t()
        sigemptyset(&urgent)
        sigaddset(&urgent, SIGURG)
        pthread_sigmask(SIG_UNBLOCK, &urgent, nil)
        let interruptedBefore = state.withLock { state -> Bool in
            state.thread = pthread_self()
            return state.interrupted
        }
        if interruptedBefore { signal() }
        let timer = seconds.map { seconds in Deadline(after: seconds) { [self] in interrupt() } }
        defer {
            state.withLock { $0.thread = nil }
            pthread_sigmask(SIG_BLOCK, &urgent, nil)
            timer?.cancel()
        }
        return body(left)
    }

    /// Runs `body` within `seconds` (`run(within:_:)` of an interruption of its own).
    static func run<T>(within seconds: Double, _ body: (_ left: () -> Double) -> T) -> T {
        SystemCallInterruption().run(within: seconds, body)
    }

    /// Ends the body running now, and any body run after: its blocking calls return, and it is
    /// told no time is left.
    func interrupt() {
        let running = state.withLock { state -> Bool in
            defer { state.interrupted = true }
            return state.thread != nil && !state.interrupted
        }
        if running { signal() }
    }

    var isInterrupted: Bool { state.withLock { $0.interrupted } }

    /// Signals the thread running a body, and again after `repeatInterval` while one runs.
    private func signal() {
        let running = state.withLock { state -> Bool in
            guard let thread = state.thread else { return false }
            pthread_kill(thread, SIGURG)
            return true
        }
        if running { _ = Deadline(after: Self.repeatInterval) { [self] in signal() } }
    }
}
