import NIOPosix
import Synchronization

/// Work that holds a thread — scrypt (128 MiB and a third of a second or more at the default
/// cost), a PAM stack that may sleep for seconds — on a pool of its own: never on an actor, where
/// it would stall everything else that actor serves, nor on the cooperative threads or the event
/// loops every client shares. At most `threads` run at once; the rest queue. The one idiom for
/// blocking work, in the daemon (`BlockingWork`) and the login server (`PasswordWork`).
public final class BlockingPool: Sendable {
    public let threads: Int
    private let pool: NIOThreadPool

    /// `name`: its threads' names, each followed by its number (`ps -L`, `top -H`, a crash's
    /// report), at most 12 bytes (the kernel keeps 15).
    public init(threads: Int, name: String) {
        precondition(threads >= 1, "a pool needs a thread")
        assert(name.utf8.count <= 12, "the kernel names a thread in at most 15 bytes: \(name)")
        self.threads = threads
        pool = NIOThreadPool(numberOfThreads: threads)
        // NIO's one way to name a pool's threads (`start()` calls them all "TP-#N", which says
        // nothing in a crash report).
        pool._start(threadNamePrefix: name)
    }

    /// Runs `work` on one of the pool's threads, once one is free.
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive(work)
    }

    /// Runs `work` on one of the pool's threads once one is free, and returns at once. `work` is
    /// told whether the pool still runs: false when it has been or is being shut down (which this
    /// type never does), and then `work` still runs, elsewhere (so whatever it owes, it still
    /// answers).
    public func submit(_ work: @escaping @Sendable (_ active: Bool) -> Void) {
        pool.submit { work($0 == .active) }
    }

    /// A way into this pool that admits at most `limit` pieces of work running or waiting, and
    /// refuses the next at once (`Admission.Full`) rather than let a flood grow the queue.
    public func admitting(atMost limit: Int) -> Admission { Admission(pool: self, limit: limit) }

    public final class Admission: Sendable {
        /// Past the limit: refused without waiting.
        public struct Full: Error, Equatable {}

        public let limit: Int
        private let pool: BlockingPool
        private let admitted = Mutex(0)

        init(pool: BlockingPool, limit: Int) {
            precondition(limit >= 1, "an admission admits at least one")
            self.pool = pool
            self.limit = limit
        }

        public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
            let limit = self.limit
            let taken = admitted.withLock { count -> Bool in
                guard count < limit else { return false }
                count += 1
                return true
            }
            guard taken else { throw Full() }
            defer { admitted.withLock { $0 -= 1 } }
            return try await pool.run(work)
        }

        /// Work admitted and not yet ended.
        public var admittedNow: Int { admitted.withLock { $0 } }
    }
}
