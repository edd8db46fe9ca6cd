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

    private static let scryptPool = BlockingPool(threads: scryptThreads, name: "la-scrypt-")

    /// Work that mostly waits (PAM's fail delay, a remote PAM module): its own pool, so slow stacks
    /// never hold up anyone's scrypt; at most this many run at once, the rest queue.
    static func waiting<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await waitingPool.run(work)
    }

    static let waitingThreads = 4

    private static let waitingPool = BlockingPool(threads: waitingThreads, name: "la-waiting-")

    /// TPM commands (the rollback counter): one thread of their own, so they run one at a time and
    /// never wait behind a PAM stack; and never skipped when the request that asked was cancelled
    /// (a client gone mid-answer): a change made durable is followed by the counter regardless.
    static func tpm<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await Task.detached { try await tpmPool.run(work) }.value
    }

    /// A way onto the TPM's thread for one user's key uses (`KeyEngine`): at most `limit` running
    /// or waiting, the next refused at once, so that one user's flood of signatures never queues
    /// more than `limit` uses (each some ten TPM commands) ahead of everyone else's uses and
    /// counter moves.
    static func tpmAdmission(atMost limit: Int) -> BlockingPool.Admission { tpmPool.admitting(atMost: limit) }

    private static let tpmPool = BlockingPool(threads: 1, name: "la-tpm-")
}
