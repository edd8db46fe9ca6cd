import BlockingPool
import EnclaveCore
import EnclaveProtocol
import NIOCore
import Synchronization

/// Where new connections' processes are pinned (`PeerProcess`, or the privileged helper's
/// `HelperPinnedPeer`): reading the executable, then searching the process's descriptors for the
/// connection — up to a quarter of a second for a client that holds a flood of them.
/// - On a pool of their own, never on the event loop that accepted the connection, where a slow pin
///   would stall every connection that loop serves, every user's.
/// - In turn per user (`TurnsPerUser`, root's by who logged in): in a system daemon at most 2 of
///   a user's pins run at once, so a user who makes their own pins slow waits behind them and
///   holds 2 of the pool's threads at most; other users' pins run beside them.
final class PeerPins: Sendable {
    typealias Pin = @Sendable () throws(PeerProcess.Refusal) -> any PinnedPeer
    typealias Outcome = Result<any PinnedPeer, PeerProcess.Refusal>

    private struct Waiting: Sendable {
        let pin: Pin
        let promise: EventLoopPromise<Outcome>
    }

    /// Pins that run at once, every user's together; past it, a pin waits for a thread.
    static let threads = 8
    /// Pins of one user that run at once in a system daemon. A user daemon serves one user (root
    /// administering it is not pinned): its pins may take every thread.
    static let perUserInSystemMode = 2

    let perUser: Int
    private let turns: Mutex<TurnsPerUser<Waiting>>
    private let pool = BlockingPool(threads: threads, name: "la-pin-")

    init(perUser: Int) {
        self.perUser = perUser
        turns = Mutex(TurnsPerUser(atOnce: perUser))
    }

    convenience init(mode: DaemonMode) {
        self.init(perUser: mode == .system ? Self.perUserInSystemMode : Self.threads)
    }

    /// Runs `pin` for `uid` once fewer than `perUser` of that user's pins run (the rest in the order
    /// they came); its outcome on `eventLoop`.
    func pin(uid: UInt32, on eventLoop: any EventLoop, _ pin: @escaping Pin) -> EventLoopFuture<Outcome> {
        let waiting = Waiting(pin: pin, promise: eventLoop.makePromise())
        if let now = turns.withLock({ $0.arrive(uid, waiting) }) { start(now, of: uid) }
        return waiting.promise.futureResult
    }

    private func start(_ waiting: Waiting, of uid: UInt32) {
        // Run even if the pool were shut down (it lives as long as the daemon): the pin closes the
        // pidfd it was handed, and the connection gets its answer.
        pool.submit { _ in
            let outcome = Outcome { () throws(PeerProcess.Refusal) in try waiting.pin() }
            // The turn is passed on before the outcome is told: whoever hears it finds the user's
            // turn taken by the next pin, or free.
            let next = self.turns.withLock { $0.ended(uid) }
            waiting.promise.succeed(outcome)
            if let next { self.start(next, of: uid) }
        }
    }

    /// Pins running, and pins waiting behind their user's (tests).
    var underWay: (running: Int, queued: Int) { turns.withLock { ($0.running, $0.queued) } }
}
