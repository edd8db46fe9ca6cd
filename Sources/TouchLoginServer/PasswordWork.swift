import NIOCore
import NIOPosix
import Synchronization
import TouchLoginAPI

/// Where password hashing runs: a pool of its own, never a cooperative thread or an event loop
/// (scrypt is a third of a second of memory-hard work at the default cost; on the cooperative pool
/// two of them stall every other request on a 2-core machine). At most `runningAtOnce` checks run
/// (one per core, at most 4: scrypt's memory peaks at 4 × 128 MiB at the default cost), and at
/// most `limit` run or wait; past that the answer is "busy" at once rather than a queue that grows
/// with the flood.
public final class PasswordWork: Sendable {
    public let limit: Int
    private let pending = Mutex(0)
    public static let runningAtOnce = min(System.coreCount, 4)
    private static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: runningAtOnce)
        pool.start()
        return pool
    }()

    public init(limit: Int = 64) { self.limit = limit }

    /// Checks running or waiting now.
    var admitted: Int { pending.withLock { $0 } }

    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let admitted = pending.withLock { count -> Bool in
            guard count < limit else { return false }
            count += 1
            return true
        }
        guard admitted else { throw APIError(.unavailable, "The server is busy checking passwords; try again in a moment.") }
        defer { pending.withLock { $0 -= 1 } }
        return try await Self.pool.runIfActive(body)
    }
}
