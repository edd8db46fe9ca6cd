import EnclaveCore
import XCTest

/// Each user's work one piece at a time, in order; other users' side by side.
final class TurnsPerUserTests: XCTestCase {
    /// Each step: a user's piece arrives (`+`) or ends (`-`), and what may start now.
    func testEachUsersPiecesRunInTurnAndOthersAlongside() {
        enum Step {
            case arrive(UInt32, String, starts: String?)
            case end(UInt32, starts: String?)
        }
        let steps: [Step] = [
            .arrive(1000, "a1", starts: "a1"),
            .arrive(1000, "a2", starts: nil),
            .arrive(1000, "a3", starts: nil),
            .arrive(1001, "b1", starts: "b1"),
            .arrive(0, "r1", starts: "r1"),
            .end(1001, starts: nil),
            .arrive(1001, "b2", starts: "b2"),
            .end(1000, starts: "a2"),
            .end(1000, starts: "a3"),
            .arrive(1000, "a4", starts: nil),
            .end(1000, starts: "a4"),
            .end(1000, starts: nil),
            .arrive(1000, "a5", starts: "a5"),
        ]
        var turns = TurnsPerUser<String>()
        for (number, step) in steps.enumerated() {
            switch step {
            case .arrive(let uid, let work, let starts):
                XCTAssertEqual(turns.arrive(uid, work), starts, "step \(number)")
            case .end(let uid, let starts):
                XCTAssertEqual(turns.ended(uid), starts, "step \(number)")
            }
        }
        XCTAssertEqual(turns.running, 3, "1000, 1001 and root each have one piece running")
        XCTAssertEqual(turns.queued, 0)
    }

    func testAFloodOfOneUserWaitsBehindItsOwnAndNoOneElse() {
        var turns = TurnsPerUser<Int>()
        XCTAssertEqual(turns.arrive(1000, 0), 0)
        for piece in 1..<1000 { XCTAssertNil(turns.arrive(1000, piece)) }
        XCTAssertEqual(turns.queued, 999)
        XCTAssertEqual(turns.arrive(1001, 7), 7, "another user starts at once")
        XCTAssertEqual(turns.ended(1000), 1, "the flood's next, in order")
        XCTAssertEqual(turns.running, 2)
    }
}
