/// Work that takes its turn per user: at most `atOnce` pieces of each user's run at a time, the
/// rest wait in the order they came, and different users' run side by side. Pinning a client's
/// process (reading its executable and searching its descriptors, up to a quarter of a second) is
/// such work: a user who makes their own pins slow then waits behind them, and holds at most
/// `atOnce` of the threads every user shares (the rule "one user's abuse never stops another
/// user").
///
/// Pure: the shell (`PeerPins`) keeps the waiting work here and runs what each call hands back.
public struct TurnsPerUser<Work> {
    private struct Turns {
        var running = 0
        var waiting: [Work] = []
    }

    public let atOnce: Int
    private var byUser: [UInt32: Turns] = [:]

    public init(atOnce: Int) {
        precondition(atOnce >= 1, "a user runs at least one piece")
        self.atOnce = atOnce
    }

    /// `work` of `uid` has come: it is returned when it may start now (fewer than `atOnce` of that
    /// user's are running), or kept until one of them ends (nil).
    public mutating func arrive(_ uid: UInt32, _ work: Work) -> Work? {
        guard byUser[uid, default: Turns()].running < atOnce else {
            byUser[uid, default: Turns()].waiting.append(work)
            return nil
        }
        byUser[uid, default: Turns()].running += 1
        return work
    }

    /// One of `uid`'s running pieces has ended: its next piece, to start now, if one waits.
    public mutating func ended(_ uid: UInt32) -> Work? {
        guard let running = byUser[uid]?.running, running > 0 else {
            preconditionFailure("uid \(uid) ended a turn it did not have")
        }
        guard byUser[uid]!.waiting.isEmpty else { return byUser[uid]!.waiting.removeFirst() }
        if running == 1 {
            byUser[uid] = nil
        } else {
            byUser[uid]!.running -= 1
        }
        return nil
    }

    /// Pieces running, every user's together.
    public var running: Int { byUser.values.reduce(0) { $0 + $1.running } }

    /// Pieces waiting behind their user's running ones.
    public var queued: Int { byUser.values.reduce(0) { $0 + $1.waiting.count } }

    /// `uid`'s pieces running and waiting.
    public func underWay(of uid: UInt32) -> Int {
        byUser[uid].map { $0.running + $0.waiting.count } ?? 0
    }

    /// Users with a piece running (a user with none is forgotten).
    public var usersRunning: Int { byUser.count }
}
