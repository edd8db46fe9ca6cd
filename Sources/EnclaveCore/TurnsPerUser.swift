/// Work that takes its turn per user: each user's pieces run one at a time, in the order they came,
/// and different users' run side by side. Pinning a client's process (reading its executable and
/// searching its descriptors, up to a quarter of a second) is such work: a user who makes their
/// own pins slow then waits behind them alone, never another user (the rule "one user's abuse
/// never stops another user").
///
/// Pure: the shell (`PeerPins`) keeps the waiting work here and runs what each call hands back.
public struct TurnsPerUser<Work> {
    private var waiting: [UInt32: [Work]] = [:]

    public init() {}

    /// `work` of `uid` has come: it is returned when it may start now (that user has nothing
    /// running), or kept until the user's running piece ends (nil).
    public mutating func arrive(_ uid: UInt32, _ work: Work) -> Work? {
        if waiting[uid] != nil {
            waiting[uid]!.append(work)
            return nil
        }
        waiting[uid] = []
        return work
    }

    /// `uid`'s running piece has ended: its next piece, to start now, if one waits.
    public mutating func ended(_ uid: UInt32) -> Work? {
        guard var queue = waiting[uid] else {
            preconditionFailure("uid \(uid) ended a turn it did not have")
        }
        guard !queue.isEmpty else {
            waiting[uid] = nil
            return nil
        }
        let next = queue.removeFirst()
        waiting[uid] = queue
        return next
    }

    /// Users with a piece running.
    public var running: Int { waiting.count }

    /// Pieces waiting behind their user's running one.
    public var queued: Int { waiting.values.reduce(0) { $0 + $1.count } }
}
