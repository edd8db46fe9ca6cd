import EnclaveCore
import Foundation
import NIOPosix
import Synchronization
import XCTest

@testable import EnclaveServer

/// New connections' pins run off the event loop, one at a time per user, other users' beside them.
final class PeerPinsTests: XCTestCase {
    private final class Peer: PinnedPeer, Sendable {
        let identity: AppIdentity
        let session: String? = nil
        init(_ name: String) { identity = AppIdentity(name: name, kind: .app) }
        func executableChanged() -> Bool { false }
    }

    /// Attack: a user's pin that takes as long as it likes (here: until the test lets it go) holds
    /// neither the event loop that accepted the connection nor another user's pin; the same user's
    /// next pin waits behind it. Ordered by semaphores, not timed.
    func testASlowPinHoldsNeitherTheLoopNorAnotherUser() throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let pins = PeerPins()
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let order = Mutex<[String]>([])
        let slow = pins.pin(uid: 1000, on: loop) { () throws(PeerProcess.Refusal) -> any PinnedPeer in
            started.signal()
            release.wait()
            order.withLock { $0.append("slow") }
            return Peer("/usr/bin/slow")
        }
        let next = pins.pin(uid: 1000, on: loop) { () throws(PeerProcess.Refusal) -> any PinnedPeer in
            order.withLock { $0.append("same user's next") }
            throw .ended
        }
        XCTAssertEqual(started.wait(timeout: .now() + 60), .success)
        let looped = DispatchSemaphore(value: 0)
        loop.execute { looped.signal() }
        XCTAssertEqual(looped.wait(timeout: .now() + 60), .success, "the loop is free")
        let otherDone = DispatchSemaphore(value: 0)
        let other = pins.pin(uid: 1001, on: loop) { () throws(PeerProcess.Refusal) -> any PinnedPeer in
            Peer("/usr/bin/other")
        }
        other.whenComplete { _ in otherDone.signal() }
        XCTAssertEqual(otherDone.wait(timeout: .now() + 60), .success, "another user's pin, while the slow one runs")
        XCTAssertEqual(try other.wait().get().identity.name, "/usr/bin/other")
        XCTAssertEqual(pins.underWay.running, 1, "uid 1000's slow pin")
        XCTAssertEqual(pins.underWay.queued, 1, "uid 1000's next waits behind it")
        XCTAssertEqual(order.withLock { $0 }, [])
        release.signal()
        XCTAssertEqual(try slow.wait().get().identity.name, "/usr/bin/slow")
        XCTAssertThrowsError(try next.wait().get()) { XCTAssertEqual($0 as? PeerProcess.Refusal, .ended) }
        XCTAssertEqual(order.withLock { $0 }, ["slow", "same user's next"])
        XCTAssertEqual(pins.underWay.running, 0)
    }
}
