import Synchronization

@testable import EnclaveServer

/// For tests that drive a `ConnectionHandler` without a socket: each frame handed over as
/// `ConnectionShell` hands it, the request's job started at once where it was received (an
/// immediate task, as the shell's group starts it), and every job awaited by `finished()`.
final class ConnectionJobs: Sendable {
    private let started = Mutex<[Task<Void, Never>]>([])

    /// Whether the connection stays open.
    @discardableResult
    func receive(on handler: ConnectionHandler, _ payload: [UInt8], followed: Bool = false) async -> Bool {
        let received = await handler.receive(payload, followed: followed)
        if let job = received.job {
            let task = Task.immediate { await job() }
            started.withLock { $0.append(task) }
        }
        return received.open
    }

    /// Once every job started has ended (close the connections first: that ends them).
    func finished() async {
        for task in started.withLock({ $0 }) { await task.value }
    }

    /// Whether every job started has ended within `seconds` (false: some still run; they are not
    /// waited for).
    func finished(within seconds: Double) async -> Bool {
        let answered = Mutex(false)
        return await withCheckedContinuation { (answer: CheckedContinuation<Bool, Never>) in
            let once: @Sendable (Bool) -> Void = { ended in
                if answered.withLock({ done in
                    defer { done = true }
                    return !done
                }) {
                    answer.resume(returning: ended)
                }
            }
            Task {
                await self.finished()
                once(true)
            }
            Task {
                try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                once(false)
            }
        }
    }
}
