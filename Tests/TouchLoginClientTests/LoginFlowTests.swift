import TouchLoginClient
import XCTest

final class LoginFlowTests: XCTestCase {
    private func enabled() -> LoginFacts {
        var f = LoginFacts()
        f.loggedInBefore = true
        f.fingerprintEnabled = true
        f.username = "alice"
        return f
    }

    func testFirstRunAsksThePasswordThenOffersFingerprintLogin() {
        var flow = LoginFlow(facts: LoginFacts())
        XCTAssertEqual(flow.handle(.launched), .askPassword(note: nil))
        XCTAssertEqual(flow.handle(.passwordLoggedIn), .offerFingerprint(note: nil))
        XCTAssertTrue(flow.facts.loggedInBefore)
        XCTAssertTrue(flow.loggedInThisRun)
        XCTAssertEqual(flow.handle(.enableAnswered(true)), .registerDevice(replacingOldBinding: false))
        guard case .loggedIn(method: "password", _) = flow.handle(.deviceRegistered) else { return XCTFail() }
        XCTAssertTrue(flow.facts.fingerprintEnabled)
    }

    func testBothFactsTrueMeansTheFingerprintFirst() {
        var flow = LoginFlow(facts: enabled())
        XCTAssertEqual(flow.handle(.launched), .promptFingerprint)
        XCTAssertEqual(flow.handle(.fingerprintLoggedIn), .loggedIn(method: "fingerprint", note: nil))
        XCTAssertTrue(flow.loggedInThisRun)
    }

    func testOnePromptPerLaunchThenThePasswordWhateverTheFailure() {
        for problem in [FingerprintProblem.cancelled, .notRecognised, .lockedOut, .unavailable("x"), .server("y")] {
            var flow = LoginFlow(facts: enabled())
            XCTAssertEqual(flow.handle(.launched), .promptFingerprint)
            guard case .askPassword(let note?) = flow.handle(.fingerprintFailed(problem)) else {
                return XCTFail("\(problem)")
            }
            XCTAssertTrue(note.contains(problem.explanation))
            XCTAssertEqual(flow.handle(.launched), .askPassword(note: nil), "never a second prompt in one launch")
            guard case .loggedIn(method: "password", _) = flow.handle(.passwordLoggedIn) else {
                return XCTFail("\(problem)")
            }
            XCTAssertTrue(flow.facts.fingerprintEnabled, "\(problem) keeps fingerprint login enabled")
        }
    }

    func testAnEndedBindingTurnsFingerprintOffAndOffersItAgain() {
        for problem in [FingerprintProblem.enrolmentChanged, .keyInvalidated, .deviceRevoked] {
            var flow = LoginFlow(facts: enabled())
            _ = flow.handle(.launched)
            _ = flow.handle(.fingerprintFailed(problem))
            XCTAssertFalse(flow.facts.fingerprintEnabled, "\(problem)")
            guard case .offerFingerprint(let note?) = flow.handle(.passwordLoggedIn) else {
                return XCTFail("\(problem)")
            }
            XCTAssertTrue(note.contains("again"))
            XCTAssertEqual(
                flow.handle(.enableAnswered(true)),
                .registerDevice(replacingOldBinding: true),
                "the old credential is revoked"
            )
        }
    }

    func testADeclinedOfferIsNotRepeated() {
        var flow = LoginFlow(facts: LoginFacts())
        _ = flow.handle(.launched)
        _ = flow.handle(.passwordLoggedIn)
        guard case .loggedIn = flow.handle(.enableAnswered(false)) else { return XCTFail() }
        var next = LoginFlow(facts: flow.facts)
        XCTAssertEqual(next.handle(.launched), .askPassword(note: nil))
        XCTAssertEqual(next.handle(.passwordLoggedIn), .loggedIn(method: "password", note: nil))
    }

    func testThreeWrongPasswordsGiveUp() {
        var flow = LoginFlow(facts: LoginFacts())
        _ = flow.handle(.launched)
        XCTAssertEqual(flow.handle(.passwordRefused("Wrong.")), .askPassword(note: "Wrong."))
        XCTAssertEqual(flow.handle(.passwordRefused("Wrong.")), .askPassword(note: "Wrong."))
        guard case .giveUp = flow.handle(.passwordRefused("Wrong.")) else { return XCTFail() }
        XCTAssertFalse(flow.loggedInThisRun)
    }

    func testAPasswordThatCannotBeTriedEndsTheRunAtOnce() {
        var flow = LoginFlow(facts: LoginFacts())
        _ = flow.handle(.launched)
        XCTAssertEqual(
            flow.handle(.passwordUnavailable("The server cannot be reached.")),
            .giveUp("The server cannot be reached.")
        )
    }

    func testAFailedRegistrationStillLogsInWithThePassword() {
        var flow = LoginFlow(facts: LoginFacts())
        _ = flow.handle(.launched)
        _ = flow.handle(.passwordLoggedIn)
        _ = flow.handle(.enableAnswered(true))
        guard case .loggedIn(method: "password", let note?) = flow.handle(.registrationFailed("cancelled")) else {
            return XCTFail()
        }
        XCTAssertTrue(note.contains("cancelled"))
        XCTAssertFalse(flow.facts.fingerprintEnabled)
    }
}
