import EnclaveProtocol

/// The `LAContext`s of one connection, as a value. A context lives as long as its connection: when
/// the process exits, its contexts and their authorizations are gone. Memory stays bounded: at
/// most `maxLive` live contexts, and invalidated ones (explicitly, or when the app released its
/// `LAContext`) shrink to a bounded set of ids that still answer `invalidContext`.
///
/// `Running` is what the shell keeps for the work running on a context (the evaluation's input
/// channel, its tasks); the table only says when to create, hand back or drop it.
public struct ContextTable<Running> {
    public static var maxLive: Int { 1024 }
    public static var maxTombstones: Int { 4096 }
    /// Requests running at once on one connection (each a task, most waiting for the user's one
    /// prompt): a client that pipelines thousands holds no more than this.
    public static var maxRunning: Int { 64 }

    public struct Entry {
        public var authorization: ContextAuthorization?
        /// The evaluation that takes this context's prompt input, while one runs.
        public var evaluation: Running?
        /// Every request running on the context, by ticket: all of them end with the context.
        public var work: [UInt64: Running] = [:]
    }

    public enum Admission: Equatable, Sendable {
        /// The evaluation may start, with what the context has proven so far.
        case started(ContextAuthorization?)
        case invalidated
        /// One evaluation at a time per context.
        case busy
    }

    private var live: [String: Entry] = [:]
    private var tombstones: Set<String> = []
    /// The tombstones in the order they were made, as a ring once full (`oldestTombstone` is the
    /// next to forget): forgetting one costs nothing, not a shift of the whole list.
    private var tombstoneOrder: [String] = []
    private var oldestTombstone = 0
    private var nextTicket: UInt64 = 0
    /// Tracked requests not yet ended, on every context.
    public private(set) var running = 0

    public init() {}

    public var liveCount: Int { live.count }

    public func entry(_ id: String) -> Entry? { live[id] }

    /// The context's entry, created on first use. Throws when a new one would pass `maxLive`.
    private mutating func touch(_ id: String) throws(Failure) -> Entry {
        if let e = live[id] { return e }
        guard live.count < Self.maxLive else {
            throw Failure(
                .invalidParameter,
                "a connection may hold at most \(Self.maxLive) live contexts; invalidate the ones you no longer use"
            )
        }
        let e = Entry()
        live[id] = e
        return e
    }

    /// Whether a request may use the context (creating it): false once it was invalidated.
    public mutating func use(_ id: String) throws(Failure) -> Bool {
        if tombstones.contains(id) { return false }
        _ = try touch(id)
        return true
    }

    /// A request starts running on the context: its ticket, or nil when the context was
    /// invalidated (the request must not run).
    public mutating func track(_ id: String, _ request: Running) throws(Failure) -> UInt64? {
        guard running < Self.maxRunning else {
            throw Failure(
                .busy,
                "a connection may run at most \(Self.maxRunning) requests at once; wait for their answers"
            )
        }
        if tombstones.contains(id) { return nil }
        var e = try touch(id)
        let ticket = nextTicket
        nextTicket += 1
        e.work[ticket] = request
        live[id] = e
        running += 1
        return ticket
    }

    /// Changes what is kept for a running request (a no-op once it ended or the context went).
    public mutating func update(_ id: String, ticket: UInt64, _ change: (inout Running) -> Void) {
        guard var e = live[id], var running = e.work[ticket] else { return }
        change(&running)
        e.work[ticket] = running
        live[id] = e
    }

    /// The request ended.
    public mutating func untrack(_ id: String, ticket: UInt64) {
        if live[id]?.work.removeValue(forKey: ticket) != nil { running -= 1 }
    }

    /// An evaluation asks for the context's prompt input.
    public mutating func admit(_ id: String, evaluation: Running) throws(Failure) -> Admission {
        if tombstones.contains(id) { return .invalidated }
        var e = try touch(id)
        if e.evaluation != nil { return .busy }
        e.evaluation = evaluation
        live[id] = e
        return .started(e.authorization)
    }

    /// The running evaluation, to deliver prompt input to.
    public func evaluation(_ id: String) -> Running? { live[id]?.evaluation }

    /// The evaluation ended; what it proved (nil for a failure, or a success that proved nothing
    /// new) joins the context's authorization.
    public mutating func finish(_ id: String, proven: ContextAuthorization?, now: MonotonicStamp, lifetime: Double) {
        guard var e = live[id] else { return }
        e.evaluation = nil
        if let proven { e.authorization = proven.merged(into: e.authorization, now: now, lifetime: lifetime) }
        live[id] = e
    }

    /// Forgets everything but the id; returns what was running on it, for the shell to end.
    public mutating func invalidate(_ id: String) -> [Running] {
        let removed = live.removeValue(forKey: id)
        running -= removed?.work.count ?? 0
        let ended = removed.map(Self.running(in:)) ?? []
        if tombstones.insert(id).inserted {
            if tombstoneOrder.count < Self.maxTombstones {
                tombstoneOrder.append(id)
            } else {
                tombstones.remove(tombstoneOrder[oldestTombstone])
                tombstoneOrder[oldestTombstone] = id
                oldestTombstone = (oldestTombstone + 1) % Self.maxTombstones
            }
        }
        return ended
    }

    /// The connection closed: everything running on any of its contexts, for the shell to end.
    public mutating func close() -> [Running] {
        let ended = live.values.flatMap(Self.running(in:))
        live.removeAll()
        running = 0
        return ended
    }

    private static func running(in entry: Entry) -> [Running] {
        // A closure, not a key path: a key path into this generic type is built anew at run time on every call.
        (entry.evaluation.map { [$0] } ?? []) + entry.work.sorted { $0.key < $1.key }.map { $0.value }
    }
}
