import EnclaveCore
import XCTest

/// At most `atOnce` pieces of each user's work at a time, the rest in order; other users' beside them.
final class TurnsPerUserTests: XCTestCase {
    /// Each step: a user's piece arrives or ends, and what may start now.
    func testEachUsersPiecesRunInTurnAndOthersAlongside() {
        enum Step {
            case arrive(UInt32, String, starts: String?)
            case end(UInt32, starts: String?)
        }
        let steps: [Step] = [
            .arrive(1000, "a1", starts: "a1"),
            .arrive(1000, "a2", starts: "a2"),
            .arrive(1000, "a3", starts: nil),
            .arrive(1000, "a4", starts: nil),
            .arrive(1001, "b1", starts: "b1"),
            .arrive(0, "r1", starts: "r1"),
            .end(1001, starts: nil),
            .arrive(1001, "b2", starts: "b2"),
            .end(1000, starts: "a3"),
            .end(1000, starts: "a4"),
            .arrive(1000, "a5", starts: nil),
            .end(1000, starts: "a5"),
            .end(1000, starts: nil),
            .end(1000, starts: nil),
            .arrive(1000, "a6", starts: "a6"),
        ]
        var turns = TurnsPerUser<String>(atOnce: 2)
        for (number, step) in steps.enumerated() {
            switch step {
            case .arrive(let uid, let work, let starts):
                XCTAssertEqual(turns.arrive(uid, work), starts, "step \(number)")
            case .end(let uid, let starts):
                XCTAssertEqual(turns.ended(uid), starts, "step \(number)")
            }
        }
        XCTAssertEqual(turns.running, 3, "a6, b2 and r1")
        XCTAssertEqual(turns.usersRunning, 3)
        XCTAssertEqual(turns.queued, 0)
        XCTAssertNil(turns.ended(0))
        XCTAssertNil(turns.ended(1001))
        XCTAssertNil(turns.ended(1000))
        XCTAssertEqual(turns.usersRunning, 0, "a user with nothing running is forgotten")
    }

    /// What a user has under way counts their waiting pieces with their running ones, theirs only.
    func testAUsersPiecesUnderWayAreTheRunningAndTheWaiting() {
        var turns = TurnsPerUser<Int>(atOnce: 2)
        let rows: [(arriving: UInt32?, ending: UInt32?, mine: Int, others: Int)] = [
            (1000, nil, 1, 0),
            (1000, nil, 2, 0),
            (1000, nil, 3, 0),
            (1001, nil, 3, 1),
            (nil, 1000, 2, 1),
            (nil, 1000, 1, 1),
            (nil, 1001, 1, 0),
            (nil, 1000, 0, 0),
        ]
        for (number, row) in rows.enumerated() {
            if let uid = row.arriving { _ = turns.arrive(uid, number) }
            if let uid = row.ending { _ = turns.ended(uid) }
            XCTAssertEqual(turns.underWay(of: 1000), row.mine, "row \(number)")
            XCTAssertEqual(turns.underWay(of: 1001), row.others, "row \(number)")
        }
    }

    func testAFloodOfOneUserWaitsBehindItsOwnAndNoOneElse() {
        var turns = TurnsPerUser<Int>(atOnce: 1)
        XCTAssertEqual(turns.arrive(1000, 0), 0)
        for piece in 1..<1000 { XCTAssertNil(turns.arrive(1000, piece)) }
        XCTAssertEqual(turns.queued, 999)
        XCTAssertEqual(turns.arrive(1001, 7), 7, "another user starts at once")
        XCTAssertEqual(turns.ended(1000), 1, "the flood's next, in order")
        XCTAssertEqual(turns.running, 2)
    }
}
