import CPeerSocket
import Foundation
import Synchronization

/// What a dedicated thread keeps between its jobs (a claim on the reader, a D-Bus connection):
/// touched only on that thread.
protocol ThreadState: AnyObject, SendableMetatype {
    /// When the thread, with no job, calls `idle()`; nil: never.
    var idleDeadline: Date? { get }
    func idle()
}

/// Starts a thread of the daemon's own running `body`, named `name` where `ps -L`, `top -H` and
/// /proc/PID/task/TID/comm show it. The kernel keeps 15 bytes (`prctl` cuts a longer name; glibc's
/// `pthread_setname_np`, under Foundation's `Thread.name`, refuses it and names nothing), so the
/// names are short enough to be told apart whole.
func startThread(named name: String, _ body: @escaping @Sendable () -> Void) {
    assert(name.utf8.count <= 15, "the kernel names a thread in at most 15 bytes: \(name)")
    let thread = Thread {
        _ = la_set_thread_name(name)
        body()
    }
    thread.name = name
    thread.start()
}

/// Set from a task's cancellation handler, polled by a blocking loop on the thread.
private final class CancelFlag: Sendable {
    private let value = Atomic(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// One thread of its own for a blocking C API (fprintd's D-Bus calls wait for a finger for
/// minutes): its jobs run in order, never on an event loop or the cooperative pool, with the
/// state it keeps between them.
///
/// Unchecked: `state` is not Sendable and is touched only on the thread (each job gets it there);
/// the queue of jobs is in a `Mutex`.
final class DedicatedThread<State: ThreadState>: @unchecked Sendable {
    private let jobs = Mutex<[@Sendable (State) -> Void]>([])
    /// Signalled once per job queued: the thread sleeps on it, up to the state's idle deadline
    /// (a turn woken by the deadline runs a job that is already queued, and its signal later
    /// wakes a turn with nothing to run).
    private let wake = DispatchSemaphore(value: 0)
    private let state: State

    init(_ state: State, name: String) {
        self.state = state
        // The thread keeps its owner: both live as long as the daemon's sensor.
        startThread(named: name) { self.loop() }
    }

    /// Runs `body` on the thread; cancelling the task sets the flag `body` polls.
    func perform<T: Sendable>(_ body: @escaping @Sendable (State, () -> Bool) throws -> T) async throws -> T {
        let flag = CancelFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                enqueue { state in continuation.resume(with: Result { try body(state, { flag.isSet }) }) }
            }
        } onCancel: {
            flag.set()
        }
    }

    /// Runs `job` on the thread after the jobs already queued.
    func enqueue(_ job: @escaping @Sendable (State) -> Void) {
        jobs.withLock { $0.append(job) }
        wake.signal()
    }

    private func loop() {
        while true {
            let woken: Bool
            if let deadline = state.idleDeadline {
                woken = wake.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow)) == .success
            } else {
                wake.wait()
                woken = true
            }
            if let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                job(state)
                continue
            }
            // Nothing queued: a signal whose job an earlier turn ran (one woken by its deadline
            // just as the job arrived), or the idle deadline passed with no job.
            if !woken { state.idle() }
        }
    }
}

/// A blocking loop that ends, on a thread of its own (the terminal prompt's key reader, the
/// handoff socket's poll loop, one line read from a handed pipe): never on an event loop or the
/// cooperative pool. Its owner makes the loop return (a wake-up pipe, a deadline) and then waits
/// for it (`join`), or awaits what it returns (`run`).
final class LoopThread: Sendable {
    private let finished = DispatchSemaphore(value: 0)

    init(name: String, _ body: @escaping @Sendable () -> Void) {
        let finished = self.finished
        startThread(named: name) {
            body()
            finished.signal()
        }
    }

    /// Blocks until the loop has returned (at once when it already has, however often asked).
    func join() {
        finished.wait()
        finished.signal()
    }

    /// `join`, waiting at most `seconds`: whether the loop has returned.
    func join(within seconds: Double) -> Bool {
        guard finished.wait(timeout: .now() + seconds) == .success else { return false }
        finished.signal()
        return true
    }

    /// Runs `body` on a thread of its own and answers what it returns.
    static func run<T: Sendable>(name: String, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { done in
            _ = LoopThread(name: name) { done.resume(returning: body()) }
        }
    }
}

/// Jobs run in order on a thread of its own, started with the first job and ended by the job
/// `finish` queues (run on the caller's thread when no job came before: no thread is started just
/// for it): a terminal prompt's writer, whose writes a client can hold up to their deadline
/// (`SystemCallInterruption`, which signals the thread), so they run on no thread but the
/// prompt's.
final class SerialThread: Sendable {
    private struct Jobs {
        var queued: [@Sendable () -> Void] = []
        var started = false
        var finished = false
    }
    private let jobs = Mutex(Jobs())
    /// Signalled once per job queued.
    private let wake = DispatchSemaphore(value: 0)
    private let name: String

    init(name: String) { self.name = name }

    /// Runs `job` after the jobs already queued; nothing once `finish` was called.
    func async(_ job: @escaping @Sendable () -> Void) { queue(job, last: false) }

    /// Runs `job` after the jobs already queued, then ends the thread (or now, on this thread,
    /// when none was queued before); false (and nothing) if called before.
    @discardableResult
    func finish(_ job: @escaping @Sendable () -> Void = {}) -> Bool { queue(job, last: true) }

    @discardableResult
    private func queue(_ job: @escaping @Sendable () -> Void, last: Bool) -> Bool {
        enum Queued { case refused, runHere, startThread, queued }
        let queued = jobs.withLock { jobs -> Queued in
            guard !jobs.finished else { return .refused }
            jobs.finished = last
            if last && !jobs.started { return .runHere }
            defer { jobs.started = true }
            jobs.queued.append(job)
            return jobs.started ? .queued : .startThread
        }
        switch queued {
        case .refused: return false
        case .runHere: job()
        // The thread keeps its owner until the last job has run.
        case .startThread:
            _ = LoopThread(name: name) { self.loop() }
            wake.signal()
        case .queued: wake.signal()
        }
        return true
    }

    private func loop() {
        while true {
            wake.wait()
            let (job, last) = jobs.withLock { jobs in
                let job = jobs.queued.removeFirst()
                return (job, jobs.finished && jobs.queued.isEmpty)
            }
            job()
            if last { return }
        }
    }
}
