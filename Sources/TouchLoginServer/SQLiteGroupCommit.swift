import GRDB
import Synchronization

/// One writer that batches: writes that arrive while a commit is under way wait, then run
/// together in the next transaction, each in its own savepoint (one that throws is rolled back
/// alone), and share its one durable commit. Each caller is answered only after the commit that
/// holds its write — as durable as a transaction of its own, at a fraction of the fsyncs when
/// many logins arrive at once.
final class SQLiteGroupCommit: Sendable {
    private struct Job: Sendable {
        let body: @Sendable (Database) throws -> any Sendable
        let continuation: CheckedContinuation<any Sendable, any Error>
    }

    private struct State {
        var pending: [Job] = []
        var writing = false
    }

    private let writer: DatabasePool
    private let state = Mutex(State())
    /// At most this many writes share one transaction (a bound on the time each waits).
    let maxBatch: Int

    init(_ writer: DatabasePool, maxBatch: Int = 256) {
        self.writer = writer
        self.maxBatch = maxBatch
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let value = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<any Sendable, any Error>) in
            let start = state.withLock { state -> Bool in
                state.pending.append(Job(body: body, continuation: continuation))
                guard !state.writing else { return false }
                state.writing = true
                return true
            }
            if start { commitNext() }
        }
        return value as! T
    }

    /// Runs what is pending in one transaction, answers its callers, and goes on while more came.
    private func commitNext() {
        let batch = state.withLock { state -> [Job] in
            let batch = Array(state.pending.prefix(maxBatch))
            state.pending.removeFirst(batch.count)
            if batch.isEmpty { state.writing = false }
            return batch
        }
        guard !batch.isEmpty else { return }
        writer.asyncWrite({ db -> [Result<any Sendable, any Error>] in
            batch.map { job in
                var outcome: Result<any Sendable, any Error> = .failure(CancellationError())
                do {
                    try db.inSavepoint {
                        outcome = .success(try job.body(db))
                        return .commit
                    }
                } catch {
                    outcome = .failure(error)
                }
                return outcome
            }
        }, completion: { _, committed in
            switch committed {
            case .success(let outcomes):
                for (job, outcome) in zip(batch, outcomes) { job.continuation.resume(with: outcome) }
            case .failure(let error):
                for job in batch { job.continuation.resume(throwing: error) }
            }
            self.commitNext()
        })
    }
}
