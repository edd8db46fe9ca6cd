import NIOPosix
import Synchronization
import TouchLoginAPI

/// Where password hashing runs: NIO's blocking pool, never a cooperative thread or an event loop
/// (scrypt is tens of milliseconds of memory-hard work; on the cooperative pool two of them stall
/// every other request on a 2-core machine). At most `limit` checks wait or run at once; past
/// that the answer is "busy" at once rather than a queue that grows with the flood.
public final class PasswordWork: Sendable {
    public let limit: Int
    private let pending = Mutex(0)

    public init(limit: Int = 64) { self.limit = limit }

    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let admitted = pending.withLock { count -> Bool in
            guard count < limit else { return false }
            count += 1
            return true
        }
        guard admitted else { throw APIError(.unavailable, "The server is busy checking passwords; try again in a moment.") }
        defer { pending.withLock { $0 -= 1 } }
        return try await NIOThreadPool.singleton.runIfActive(body)
    }
}
