import EnclaveProtocol

/// How many connections the daemon serves at once, per user and in all: one user's flood of
/// connections (each an open descriptor, a task and a handler) must never leave another user
/// unanswered, nor run the daemon out of descriptors (an accept loop that fails on EMFILE spins).
public struct ConnectionBudget: Sendable {
    public struct Limits: Sendable, Equatable {
        public var perUser: Int
        public var total: Int

        /// Our choice: a user's apps rarely hold more than a handful of connections each (one shared
        /// connection per process); 256 per user and 4,096 in all stay far below the descriptors the
        /// daemon raises its limit to (`ConnectionBudget.descriptorsNeeded`).
        public static let standard = Limits(perUser: 256, total: 4096)

        public init(perUser: Int, total: Int) {
            self.perUser = perUser
            self.total = total
        }
    }

    public enum Refusal: Equatable, Sendable {
        case userFull(limit: Int)
        case daemonFull(limit: Int)

        public var failure: Failure {
            switch self {
            case .userFull(let limit):
                return Failure(
                    .busy,
                    "this user already has \(limit) connections to the daemon; close some and try again"
                )
            case .daemonFull(let limit):
                return Failure(.busy, "the daemon serves \(limit) connections already; try again shortly")
            }
        }
    }

    public let limits: Limits
    private var open: [UInt32: Int] = [:]
    public private(set) var total = 0

    public init(limits: Limits = .standard) { self.limits = limits }

    /// Descriptors the daemon needs beyond its connections (database, log, sensor, D-Bus, pools).
    public static let descriptorReserve = 128
    /// A connection holds its socket and its client's pinned `/proc/PID` (`PeerProcess`).
    public static let descriptorsPerConnection = 2

    /// The descriptors `connections` connections and the daemon itself need.
    public static func descriptors(forConnections connections: Int) -> Int {
        connections * descriptorsPerConnection + descriptorReserve
    }

    /// How many connections `descriptors` descriptors allow (at least one).
    public static func connections(forDescriptors descriptors: Int) -> Int {
        max(1, (descriptors - descriptorReserve) / descriptorsPerConnection)
    }

    public var descriptorsNeeded: Int { Self.descriptors(forConnections: limits.total) }

    public func connections(of uid: UInt32) -> Int { open[uid] ?? 0 }

    /// Counts the connection in, or says why it is refused (and counts nothing).
    public mutating func admit(_ uid: UInt32) -> Refusal? {
        if total >= limits.total { return .daemonFull(limit: limits.total) }
        let mine = open[uid] ?? 0
        if mine >= limits.perUser { return .userFull(limit: limits.perUser) }
        open[uid] = mine + 1
        total += 1
        return nil
    }

    /// An admitted connection ended.
    public mutating func release(_ uid: UInt32) {
        guard let mine = open[uid], mine > 0 else { return }
        open[uid] = mine == 1 ? nil : mine - 1
        total -= 1
    }
}
