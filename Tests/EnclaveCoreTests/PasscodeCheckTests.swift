import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

/// One passcode entry, inside or outside an evaluation: admitted or refused uncounted, then recorded.
final class PasscodeCheckTests: XCTestCase {
    let clock = ManualClock()

    func testRefusalsAreNotCheckedNorCounted() {
        let rows: [(passcodeSet: Bool, failures: Int, expected: PasscodeCheck.Refusal?)] = [
            (false, 0, .notSet),
            (true, 0, nil),
            (true, 4, nil),
            (true, 5, .retryLater(seconds: 60)),
            (true, 6, .retryLater(seconds: 300)),
            (true, 10, .disabled),
            (false, 10, .notSet),
        ]
        for row in rows {
            let ledger = AttemptLedger.withPasscodeFailures(row.failures, clock: clock)
            XCTAssertEqual(
                PasscodeCheck.admit(passcodeSet: row.passcodeSet, ledger: ledger, now: clock.monotonic()),
                row.expected,
                "\(row)"
            )
        }
    }

    func testRefusalsAnswerWithTheirCodes() {
        XCTAssertEqual(PasscodeCheck.Refusal.notSet.failure.code, .passcodeNotSet)
        let later = PasscodeCheck.Refusal.retryLater(seconds: 59.2).failure
        XCTAssertEqual(later.code, .passcodeRetryLater)
        XCTAssertEqual(later.retryAfter, 59.2)
        XCTAssertTrue(later.message.contains("60 s"), later.message)
        XCTAssertEqual(PasscodeCheck.Refusal.disabled.failure.code, .passcodeDisabled)
    }

    func testAResultIsRecordedAndAnswered() {
        var ledger = AttemptLedger.withPasscodeFailures(3, clock: clock)
        XCTAssertEqual(
            PasscodeCheck.record(
                correct: false,
                attempt: Fixture.wrong(100),
                ledger: &ledger,
                now: clock.monotonic(),
                wall: clock.wall()
            ),
            .incorrect(retryAfter: nil)
        )
        XCTAssertEqual(ledger.passcodeFailures, 4)
        let fifth = PasscodeCheck.record(
            correct: false,
            attempt: Fixture.wrong(101),
            ledger: &ledger,
            now: clock.monotonic(),
            wall: clock.wall()
        )
        XCTAssertEqual(fifth, .incorrect(retryAfter: 60), "the fifth failure starts a delay, and the answer says so")
        XCTAssertEqual(fifth.failure?.code, .passcodeIncorrect)
        XCTAssertEqual(fifth.failure?.retryAfter, 60)
        // The same wrong entry again is not a new guess.
        clock.advance(60)
        _ = PasscodeCheck.record(
            correct: false,
            attempt: Fixture.wrong(101),
            ledger: &ledger,
            now: clock.monotonic(),
            wall: clock.wall()
        )
        XCTAssertEqual(ledger.passcodeFailures, 5)

        let accepted = PasscodeCheck.record(
            correct: true,
            attempt: Data(),
            ledger: &ledger,
            now: clock.monotonic(),
            wall: clock.wall()
        )
        XCTAssertEqual(accepted, .accepted)
        XCTAssertNil(accepted.failure)
        XCTAssertEqual(ledger.passcodeFailures, 0)
    }
}
