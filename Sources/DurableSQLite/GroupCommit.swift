import GRDB
import Synchronization

/// Writes that must be durable before their answer leaves (a keychain add, a login's sign
/// counter), gathered into shared commits: while one commit reaches the disk, the writes that
/// arrive meanwhile gather for the next. Each write runs in a savepoint of its own, so one that
/// fails (a duplicate, a quota) fails alone; a commit that fails fails every write in it. Nothing
/// is answered before its commit — as durable as a transaction of its own, at a fraction of the
/// syncs when many arrive at once. The callers never wait for the disk on their own thread: the
/// commits run on the pool's writer.
public final class GroupCommit: Sendable {
    private struct Job: Sendable {
        /// Runs inside the batch's transaction, in a savepoint of its own.
        let work: @Sendable (Database) throws -> any Sendable
        let continuation: CheckedContinuation<any Sendable, any Error>
    }

    private struct State {
        var waiting: [Job] = []
        var writing = false
        /// While above zero (`hold`), no batch starts.
        var held = 0
        var commits = 0
    }

    private let pool: DatabasePool
    private let state = Mutex(State())
    /// Past this many writes a commit takes no more (a bound on the time each waits); the rest
    /// wait for the next.
    public let batchLimit: Int

    public init(pool: DatabasePool, batchLimit: Int = 256) {
        precondition(batchLimit > 0, "a commit takes at least one write")
        self.pool = pool
        self.batchLimit = batchLimit
    }

    /// Writes waiting for a commit (for tests).
    public var waitingWrites: Int { state.withLock { $0.waiting.count } }

    /// Transactions committed so far (for tests and benchmarks: writes ÷ commits is the gathering).
    public var commits: Int { state.withLock { $0.commits } }

    /// Runs `work` in the next shared transaction and returns its result once that is durable.
    public func write<T: Sendable>(_ work: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let value = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<any Sendable, any Error>) in
            let start = state.withLock { state -> Bool in
                state.waiting.append(Job(work: work, continuation: continuation))
                guard !state.writing, state.held == 0 else { return false }
                state.writing = true
                return true
            }
            if start { commitNext() }
        }
        return value as! T
    }

    /// Holds every commit until the returned function is called (for tests that must line up
    /// what happens while a write waits).
    public func hold() -> @Sendable () -> Void {
        state.withLock { $0.held += 1 }
        let released = Atomic(false)
        return { [self] in
            guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
            let restart = state.withLock { state -> Bool in
                state.held -= 1
                guard state.held == 0, !state.writing, !state.waiting.isEmpty else { return false }
                state.writing = true
                return true
            }
            if restart { commitNext() }
        }
    }

    /// Commits what waits in one transaction, answers its writers, and goes on while more came.
    private func commitNext() {
        let batch = state.withLock { state -> [Job] in
            guard state.held == 0 else {
                state.writing = false
                return []
            }
            let batch = Array(state.waiting.prefix(batchLimit))
            state.waiting.removeFirst(batch.count)
            if batch.isEmpty { state.writing = false }
            return batch
        }
        guard !batch.isEmpty else { return }
        pool.asyncWrite(
            { db -> [Result<any Sendable, any Error>] in
                var outcomes: [Result<any Sendable, any Error>] = []
                for job in batch {
                    do {
                        var value: (any Sendable)?
                        try db.inSavepoint {
                            value = try job.work(db)
                            return .commit
                        }
                        outcomes.append(.success(value!))
                    } catch {
                        // An error that ended the whole transaction (I/O, a full disk): nothing before
                        // it may be reported written.
                        if !db.isInsideTransaction { throw error }
                        outcomes.append(.failure(error))
                    }
                }
                return outcomes
            },
            completion: { [self] _, committed in
                switch committed {
                case .success(let outcomes):
                    state.withLock { $0.commits += 1 }
                    for (job, outcome) in zip(batch, outcomes) { job.continuation.resume(with: outcome) }
                case .failure(let error):
                    for job in batch { job.continuation.resume(throwing: error) }
                }
                commitNext()
            }
        )
    }
}
