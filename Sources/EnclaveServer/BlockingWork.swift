import NIOPosix

/// Work that holds a thread — scrypt (128 MiB and ~0.5 s at the default cost), a PAM stack that
/// may sleep for seconds — runs on bounded pools: never on a user's actor, where it would stall
/// every other request of that user, nor on the cooperative threads every user shares.
enum BlockingWork {
    /// scrypt runs: at most `scryptThreads` at once for the whole daemon, every user together, so
    /// its memory peaks at `scryptThreads` × 128 MiB (256 MiB) at the default cost; the rest queue.
    static func compute<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await scryptPool.runIfActive(work)
    }

    static let scryptThreads = 2

    private static let scryptPool = started(threads: scryptThreads)

    /// Work that mostly waits (PAM's fail delay, a remote PAM module): its own pool, so slow stacks
    /// never hold up anyone's scrypt; at most this many run at once, the rest queue.
    static func waiting<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await waitingPool.runIfActive(work)
    }

    static let waitingThreads = 4

    private static let waitingPool = started(threads: waitingThreads)

    private static func started(threads: Int) -> NIOThreadPool {
        let pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
        return pool
    }
}
