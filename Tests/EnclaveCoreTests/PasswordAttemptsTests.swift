import EnclaveCore
import Foundation
import XCTest

/// `PasswordAttempts`: the passcode's delays, per item, without "disabled".
final class PasswordAttemptsTests: XCTestCase {
    private let start = Date(timeIntervalSince1970: 1_000_000)

    func testDelaysFollowThePasscodeScheduleAndNeverLockForGood() {
        // failures so far → the delay the last one started.
        let table: [(failures: Int, delay: Double?)] = [
            (1, nil), (4, nil), (5, 60), (6, 300), (7, 900), (8, 900), (9, 3600), (10, 3600), (25, 3600),
        ]
        for row in table {
            var attempts = PasswordAttempts()
            for _ in 0..<row.failures { attempts.recordFailure(now: start) }
            XCTAssertEqual(attempts.failures, row.failures)
            XCTAssertEqual(attempts.retryAfter(now: start), row.delay, "\(row.failures) failures")
            if let delay = row.delay {
                XCTAssertEqual(
                    attempts.retryAfter(now: start.addingTimeInterval(delay - 1)),
                    1,
                    "\(row.failures) failures"
                )
                XCTAssertNil(
                    attempts.retryAfter(now: start.addingTimeInterval(delay)),
                    "over after \(delay) s, even after 10 failures"
                )
            }
        }
    }

    func testAClockSetBackNeverLengthensTheDelay() {
        var attempts = PasswordAttempts()
        for _ in 0..<5 { attempts.recordFailure(now: start) }
        XCTAssertEqual(attempts.retryAfter(now: start.addingTimeInterval(-86_400)), 60)
    }
}
