import EnclaveCore
import Foundation
import NIOPosix
import Synchronization
import XCTest

@testable import EnclaveServer

/// New connections' pins run off the event loop, at most `perUser` of a user's at once,
/// other users' beside them.
final class PeerPinsTests: XCTestCase {
    private final class Peer: PinnedPeer, Sendable {
        let identity: AppIdentity
        let session: String? = nil
        init(_ name: String) { identity = AppIdentity(name: name, kind: .app) }
        func executableChanged() -> Bool { false }
    }

    /// Attack: a user's pins that take as long as they like (here: until the test lets them go)
    /// hold neither the event loop that accepted the connections nor another user's pin; that
    /// user's next pin waits behind them. Ordered by semaphores, not timed.
    func testSlowPinsHoldNeitherTheLoopNorAnotherUser() throws {
        let pins = PeerPins(mode: .system)
        XCTAssertEqual(pins.perUser, 2)
        XCTAssertEqual(PeerPins(mode: .user).perUser, PeerPins.threads, "one user: every thread")
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let order = Mutex<[String]>([])
        let slow = (0..<pins.perUser).map { _ in
            pins.pin(uid: 1000, on: loop) { () throws(PeerProcess.Refusal) -> any PinnedPeer in
                started.signal()
                release.wait()
                order.withLock { $0.append("slow") }
                return Peer("/usr/bin/slow")
            }
        }
        let next = pins.pin(uid: 1000, on: loop) { () throws(PeerProcess.Refusal) -> any PinnedPeer in
            order.withLock { $0.append("same user's next") }
            throw .ended
        }
        for _ in slow { XCTAssertEqual(started.wait(timeout: .now() + 60), .success) }
        let looped = DispatchSemaphore(value: 0)
        loop.execute { looped.signal() }
        XCTAssertEqual(looped.wait(timeout: .now() + 60), .success, "the loop is free")
        let otherDone = DispatchSemaphore(value: 0)
        let other = pins.pin(uid: 1001, on: loop) { () throws(PeerProcess.Refusal) -> any PinnedPeer in
            Peer("/usr/bin/other")
        }
        other.whenComplete { _ in otherDone.signal() }
        XCTAssertEqual(otherDone.wait(timeout: .now() + 60), .success, "another user's pin, while the slow ones run")
        XCTAssertEqual(try other.wait().get().identity.name, "/usr/bin/other")
        XCTAssertEqual(pins.underWay.running, pins.perUser, "uid 1000's slow pins")
        XCTAssertEqual(pins.underWay.queued, 1, "uid 1000's next waits behind them")
        XCTAssertEqual(order.withLock { $0 }, [])
        // One of the slow pins ends: the user's next takes its turn while the other still runs.
        release.signal()
        XCTAssertThrowsError(try next.wait().get()) { XCTAssertEqual($0 as? PeerProcess.Refusal, .ended) }
        XCTAssertEqual(order.withLock { $0 }, ["slow", "same user's next"])
        XCTAssertEqual(pins.underWay.running, 1, "the other slow pin")
        release.signal()
        for pin in slow { XCTAssertEqual(try pin.wait().get().identity.name, "/usr/bin/slow") }
        XCTAssertEqual(pins.underWay.running, 0)
    }
}
