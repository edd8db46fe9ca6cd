import EnclaveCore
import XCTest

/// Which saves move the TPM's counter, and how a state stands against it.
final class RollbackCounterTests: XCTestCase {
    typealias Guarded = RollbackCounter.Guarded

    func testWhatMustMoveTheCounter() throws {
        let verifier = try PasscodeVerifier.make(passcode: "123456", cost: 10, minimumLength: 4)
        let other = try PasscodeVerifier.make(passcode: "654321", cost: 10, minimumLength: 4)
        let base = Guarded(passcodeFailures: 2, loginPasswordFailures: 1, passcode: verifier, enrolmentGeneration: 3)
        func with(_ change: (inout Guarded) -> Void) -> Guarded {
            var g = base
            change(&g)
            return g
        }
        let rows: [(String, Guarded?, Guarded, Bool)] = [
            ("nothing changed", base, base, false),
            ("a wrong passcode counted", base, with { $0.passcodeFailures = 3 }, true),
            ("a success cleared the failures", base, with { $0.passcodeFailures = 0 }, false),
            ("a wrong login password", base, with { $0.loginPasswordFailures = 2 }, true),
            ("the login password forgiven", base, with { $0.loginPasswordFailures = 0 }, false),
            ("biometrics locked", base, with { $0.biometryLocked = true }, true),
            ("biometrics unlocked", with { $0.biometryLocked = true }, base, false),
            ("a passcode changed", base, with { $0.passcode = other }, true),
            ("a passcode removed", base, with { $0.passcode = nil }, true),
            ("a passcode set", with { $0.passcode = nil }, base, true),
            ("the passcode epoch moved", base, with { $0.passcodeEpoch = 1 }, true),
            ("an enrolment change", base, with { $0.enrolmentGeneration = 4 }, true),
            ("a user's first record", nil, Guarded(), false),
            ("a user's first record, already locked", nil, Guarded(biometryLocked: true), true),
        ]
        for (name, old, new, moves) in rows {
            XCTAssertEqual(RollbackCounter.mustAdvance(from: old, to: new), moves, name)
        }
    }

    func testHowAStateStandsAgainstTheCounter() {
        let rows: [(String, UInt64, UInt64?, Bool, String?)] = [
            ("in step", 40, 40, true, nil),
            ("one move unfinished", 41, 40, true, "finish 1"),
            ("three moves unfinished", 43, 40, true, "finish 3"),
            ("a state put back", 38, 40, true, "older than"),
            ("far ahead", 40 + RollbackCounter.maximumCatchUp + 1, 40, true, "ahead of"),
            ("the counter deleted", 40, nil, true, "gone"),
            ("a record swapped", 40, 40, false, "not the ones"),
        ]
        for (name, generation, counter, intact, expected) in rows {
            let standing = RollbackCounter.standing(generation: generation, counter: counter, anchorIntact: intact)
            switch (standing, expected) {
            case (.inStep, nil): break
            case (.finishMove(let moves), let e?) where e.hasPrefix("finish"):
                XCTAssertEqual("finish \(moves)", e, name)
            case (.refused(let why), let e?): XCTAssertTrue(why.contains(e), "\(name): \(why)")
            default: XCTFail("\(name): \(standing)")
            }
        }
    }
}
