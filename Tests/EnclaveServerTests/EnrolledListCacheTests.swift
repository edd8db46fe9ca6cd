import XCTest

@testable import EnclaveServer

/// fprintd's enrolled lists, kept a short while and forgotten on every change we know of.
final class EnrolledListCacheTests: XCTestCase {
    func testAListIsKeptForItsLifetimeOnly() {
        var cache = EnrolledListCache()
        cache.store(["right-thumb"], of: "alice", at: 100, generation: cache.generation)
        XCTAssertEqual(cache.fingers(of: "alice", now: 100), ["right-thumb"])
        XCTAssertEqual(cache.fingers(of: "alice", now: 100 + EnrolledListCache.lifetime - 0.01), ["right-thumb"])
        XCTAssertNil(
            cache.fingers(of: "alice", now: 100 + EnrolledListCache.lifetime),
            "a change made with another tool is seen after the lifetime"
        )
        XCTAssertNil(cache.fingers(of: "alice", now: 99), "a clock that went back keeps nothing")
        XCTAssertNil(cache.fingers(of: "bob", now: 100))
    }

    func testOurOwnChangeForgetsTheUsersList() {
        var cache = EnrolledListCache()
        cache.store(["right-thumb"], of: "alice", at: 100, generation: cache.generation)
        cache.store(["left-thumb"], of: "bob", at: 100, generation: cache.generation)
        cache.forget("alice")
        XCTAssertNil(cache.fingers(of: "alice", now: 100))
        XCTAssertEqual(cache.fingers(of: "bob", now: 100), ["left-thumb"])
        cache.forgetAll()
        XCTAssertNil(cache.fingers(of: "bob", now: 100))
    }

    func testAReadThatStartedBeforeAChangeIsNotKept() {
        var cache = EnrolledListCache()
        let before = cache.generation
        cache.forget("alice")  // an enrolment finished while the read was on the bus
        cache.store(["right-thumb"], of: "alice", at: 100, generation: before)
        XCTAssertNil(cache.fingers(of: "alice", now: 100))
        cache.store(["right-thumb", "left-thumb"], of: "alice", at: 100, generation: cache.generation)
        XCTAssertEqual(cache.fingers(of: "alice", now: 100), ["right-thumb", "left-thumb"])
    }
}
