import EnclaveCore
import XCTest

final class PasscodeDelayScheduleTests: XCTestCase {
    func testZeroToFourFailuresHaveNoDelay() {
        for n in 0...4 { XCTAssertEqual(PasscodeDelaySchedule.step(afterConsecutiveFailures: n), .none, "\(n)") }
    }

    func testFiveFailuresOneMinute() {
        XCTAssertEqual(PasscodeDelaySchedule.step(afterConsecutiveFailures: 5), .delay(seconds: 60))
    }

    func testSixFailuresFiveMinutes() {
        XCTAssertEqual(PasscodeDelaySchedule.step(afterConsecutiveFailures: 6), .delay(seconds: 300))
    }

    func testSevenAndEightFailuresFifteenMinutes() {
        XCTAssertEqual(PasscodeDelaySchedule.step(afterConsecutiveFailures: 7), .delay(seconds: 900))
        XCTAssertEqual(PasscodeDelaySchedule.step(afterConsecutiveFailures: 8), .delay(seconds: 900))
    }

    func testNineFailuresOneHour() {
        XCTAssertEqual(PasscodeDelaySchedule.step(afterConsecutiveFailures: 9), .delay(seconds: 3600))
    }

    func testTenAndMoreFailuresDisabled() {
        XCTAssertEqual(PasscodeDelaySchedule.disabledAfter, 10)
        for n in [10, 11, 50, 1_000_000] {
            XCTAssertEqual(PasscodeDelaySchedule.step(afterConsecutiveFailures: n), .disabled, "\(n)")
        }
    }
}
