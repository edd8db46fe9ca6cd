import BlockingPool

/// The daemon's blocking work, on bounded pools (`BlockingPool`): never on a user's actor, where it
/// would stall every other request of that user, nor on the cooperative threads every user shares.
enum BlockingWork {
    /// scrypt runs: at most `scryptThreads` at once for the whole daemon, every user together, so
    /// its memory peaks at `scryptThreads` × 128 MiB (256 MiB) at the default cost; the rest queue.
    static func compute<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await scryptPool.run(work)
    }

    static let scryptThreads = 2

    private static let scryptPool = BlockingPool(threads: scryptThreads)

    /// Work that mostly waits (PAM's fail delay, a remote PAM module): its own pool, so slow stacks
    /// never hold up anyone's scrypt; at most this many run at once, the rest queue.
    static func waiting<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await waitingPool.run(work)
    }

    static let waitingThreads = 4

    private static let waitingPool = BlockingPool(threads: waitingThreads)
}
