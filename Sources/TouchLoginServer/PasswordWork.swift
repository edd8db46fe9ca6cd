import BlockingPool
import NIOCore
import TouchLoginAPI

/// Where password hashing runs: a pool of its own, never a cooperative thread or an event loop
/// (scrypt is a third of a second of memory-hard work at the default cost; on the cooperative pool
/// two of them stall every other request on a 2-core machine). At most `runningAtOnce` checks run
/// (one per core, at most 4: scrypt's memory peaks at 4 × 128 MiB at the default cost), and at
/// most `limit` run or wait; past that the answer is "busy" at once rather than a queue that grows
/// with the flood.
public final class PasswordWork: Sendable {
    public static let runningAtOnce = min(System.coreCount, 4)
    /// One pool for every `PasswordWork` of the process: the bound on memory is the process's.
    private static let threads = BlockingPool(threads: runningAtOnce, name: "tl-password-")
    /// This server's own limit on checks running or waiting, in front of the shared threads.
    private let admission: BlockingPool.Admission
    public var limit: Int { admission.limit }

    public init(limit: Int = 64) { admission = Self.threads.admitting(atMost: limit) }

    /// Checks running or waiting now.
    var admitted: Int { admission.admittedNow }

    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        do { return try await admission.run(body) } catch is BlockingPool.Admission.Full {
            throw APIError(.unavailable, "The server is busy checking passwords; try again in a moment.")
        }
    }
}
