import Foundation
import GRDB

/// Writes that must be durable before their answer leaves the daemon (keychain adds), gathered into shared
/// commits (group commit): each waits, off the caller's thread, for the transaction that holds
/// it; while one commit reaches the disk, the writes that arrive meanwhile gather for the next.
/// Each write runs in a savepoint of its own, so one that fails (a duplicate, a quota) fails
/// alone; a commit that fails fails every write in it. Nothing is answered before its commit.
///
/// One writer thread (a serial queue), so the callers — a user's actor, the event loops — never
/// wait for the disk themselves and other requests go on meanwhile.
final class GroupCommit: @unchecked Sendable {
    /// Past this many writes a commit takes no more; the rest wait for the next.
    static let batchLimit = 256

    private struct Job {
        /// Runs inside the batch's transaction, in a savepoint of its own.
        let work: (Database) throws -> Void
        /// After the commit: nil, or the write's own error, or the commit's.
        let finish: (Error?) -> Void
    }

    private let pool: DatabasePool
    private let lock = NSLock()
    private var waiting: [Job] = []
    private var running = false
    /// While above zero (`hold`), no batch starts.
    private var held = 0
    private var committed = 0
    private let writer = DispatchQueue(label: "laenclaved.group-commit")

    init(pool: DatabasePool) { self.pool = pool }

    /// Writes waiting for a commit (for tests).
    var waitingWrites: Int { lock.withLock { waiting.count } }

    /// Holds every commit until the returned function is called (for tests that must line up
    /// what happens while a write waits).
    func hold() -> @Sendable () -> Void {
        lock.withLock { held += 1 }
        let released = ReleaseOnce()
        return { [self] in
            guard released.first() else { return }
            let restart: Bool = lock.withLock {
                held -= 1
                guard held == 0, !running, !waiting.isEmpty else { return false }
                running = true
                return true
            }
            if restart { writer.async { self.drain() } }
        }
    }

    /// Transactions committed so far (for tests and benchmarks: writes ÷ commits is the gathering).
    var commits: Int { lock.withLock { committed } }

    /// Runs `work` in the next shared transaction and returns its result once that is durable.
    func write<T: Sendable>(_ work: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            let result = ResultSlot<T>()
            enqueue(Job(work: { db in result.value = try work(db) }, finish: { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: result.value!) }
            }))
        }
    }

    private func enqueue(_ job: Job) {
        let start: Bool = lock.withLock {
            waiting.append(job)
            guard !running, held == 0 else { return false }
            running = true
            return true
        }
        if start { writer.async { self.drain() } }
    }

    /// Commits batches until nothing waits.
    private func drain() {
        while true {
            let batch: [Job] = lock.withLock {
                guard held == 0 else {
                    running = false
                    return []
                }
                let taken = Array(waiting.prefix(Self.batchLimit))
                waiting.removeFirst(taken.count)
                if taken.isEmpty { running = false }
                return taken
            }
            guard !batch.isEmpty else { return }
            commit(batch)
        }
    }

    private func commit(_ batch: [Job]) {
        var outcomes = [Error?](repeating: nil, count: batch.count)
        do {
            try pool.write { db in
                for (i, job) in batch.enumerated() {
                    do {
                        try db.inSavepoint {
                            try job.work(db)
                            return .commit
                        }
                    } catch {
                        outcomes[i] = error
                        // An error that ended the whole transaction (I/O, a full disk): nothing
                        // before it may be reported written.
                        if !db.isInsideTransaction { throw error }
                    }
                }
            }
            lock.withLock { committed += 1 }
        } catch {
            outcomes = outcomes.map { _ in error }
        }
        for (job, outcome) in zip(batch, outcomes) { job.finish(outcome) }
    }
}

/// A write's result, set inside the transaction and read after its commit (on the writer's
/// queue, then by the resumed caller: ordered by the continuation).
private final class ResultSlot<T>: @unchecked Sendable {
    var value: T?
}

private final class ReleaseOnce: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    /// True the first time only.
    func first() -> Bool { lock.withLock { defer { done = true }; return !done } }
}
