import TouchLoginServer
import XCTest

final class FailureScheduleTests: XCTestCase {
    let schedule = FailureSchedule(freeFailures: 2, firstDelay: 5, maxDelay: 60, lockAfter: 10)

    func testDelaysStartOnceTheFreeFailuresAreSpent() {
        let table: [(failures: Int, delay: Double)] = [
            (0, 0), (1, 0), (2, 5), (3, 10), (4, 20), (5, 40), (6, 60), (9, 60), (500, 60),
        ]
        for row in table { XCTAssertEqual(schedule.delay(after: row.failures), row.delay, "after \(row.failures)") }
    }

    func testDecisions() {
        let table: [(record: FailureRecord?, now: Double, expected: ThrottleDecision)] = [
            (nil, 0, .admitted),
            (FailureRecord(failures: 1, lastFailureAt: 100), 100, .admitted),
            (FailureRecord(failures: 2, lastFailureAt: 100), 101, .wait(seconds: 4)),
            (FailureRecord(failures: 2, lastFailureAt: 100), 105, .admitted),
            (FailureRecord(failures: 9, lastFailureAt: 100), 159, .wait(seconds: 1)),
            (FailureRecord(failures: 10, lastFailureAt: 100), 1e9, .locked),
        ]
        for row in table {
            XCTAssertEqual(
                schedule.decide(row.record, at: row.now),
                row.expected,
                "\(String(describing: row.record)) at \(row.now)"
            )
        }
        XCTAssertEqual(
            FailureSchedule(freeFailures: 0, firstDelay: 1, maxDelay: 1).decide(
                FailureRecord(failures: 1_000_000, lastFailureAt: 0),
                at: 2
            ),
            .admitted,
            "without lockAfter nothing locks"
        )
    }

    func testTheStricterDecisionWins() {
        let table: [(ThrottleDecision, ThrottleDecision, ThrottleDecision)] = [
            (.admitted, .admitted, .admitted), (.admitted, .wait(seconds: 3), .wait(seconds: 3)),
            (.wait(seconds: 3), .admitted, .wait(seconds: 3)),
            (.wait(seconds: 3), .wait(seconds: 7), .wait(seconds: 7)), (.wait(seconds: 9), .locked, .locked),
            (.locked, .admitted, .locked),
        ]
        for (a, b, expected) in table { XCTAssertEqual(a.combined(with: b), expected, "\(a) with \(b)") }
    }
}
