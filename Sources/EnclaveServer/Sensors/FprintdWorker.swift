import Foundation
import Synchronization

/// What a worker thread keeps between its jobs (a claim, a connection).
protocol FprintdThreadState: AnyObject, SendableMetatype {
    /// When the thread, with no job, calls `idle()`; nil: never.
    var idleDeadline: Date? { get }
    func idle()
}

/// Set from a task's cancellation handler, polled by a blocking D-Bus loop on another thread.
private final class CancelFlag: Sendable {
    private let value = Atomic(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// One thread that runs its jobs in order, with the state it keeps between them.
final class FprintdWorker<State: FprintdThreadState>: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [(State) -> Void] = []
    private let state: State

    init(_ state: State, name: String) {
        self.state = state
        // The thread keeps its worker: both live as long as the daemon's sensor.
        let thread = Thread { self.loop() }
        thread.name = name
        thread.start()
    }

    /// Runs `body` on the worker; cancelling the task sets the flag `body` polls.
    func perform<T: Sendable>(_ body: @escaping (State, () -> Bool) throws -> T) async throws -> T {
        let flag = CancelFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                enqueue { state in continuation.resume(with: Result { try body(state, { flag.isSet }) }) }
            }
        } onCancel: {
            flag.set()
        }
    }

    /// Runs `job` on the worker after the jobs already queued.
    func enqueue(_ job: @escaping (State) -> Void) {
        condition.withLock {
            jobs.append(job)
            condition.signal()
        }
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty {
                if let deadline = state.idleDeadline {
                    if !condition.wait(until: deadline), jobs.isEmpty {
                        condition.unlock()
                        state.idle()
                        condition.lock()
                    }
                } else {
                    condition.wait()
                }
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job(state)
        }
    }
}
