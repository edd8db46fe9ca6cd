import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

final class EvaluationMachineTests: XCTestCase {
    let clock = ManualClock()

    private func harness(
        _ config: EvaluationMachine.Configuration,
        _ ledger: AttemptLedger = AttemptLedger()
    ) -> Harness {
        Harness(config, ledger: ledger, clock: clock)
    }

    private let lockoutMessage = Preflight.lockoutMessage(.failures)

    // MARK: Start

    func testBiometricPolicyStartArmsSensorAndShowsExactPrompt() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        let expected = PromptScreen(
            app: Fixture.app,
            reason: Fixture.reason,
            instruction: "Touch ID: place your finger on the sensor",
            cancelTitle: "Cancel",
            fallbackTitle: nil,
            passcodeEntry: false,
            retryOffered: false,
            sensorArmed: true,
            sensorName: "Touch ID",
            sensorSimulated: true,
            passcodeRetryAfter: nil,
            passcodeDisabled: false
        )
        XCTAssertEqual(h.start(), [.armSensor, .show(expected)])
        XCTAssertTrue(h.machine.isSensorArmed)
        XCTAssertFalse(h.machine.isFinished)
    }

    /// Scripted input on a real reader is said on every screen: armed, after a failed match, at the passcode.
    func testEveryScreenWarnsWhenScriptedInputReachesARealReader() {
        for onRealSensor in [false, true] {
            var config = Fixture.config(.deviceOwnerAuthentication)
            config.scriptedInputOnRealSensor = onRealSensor
            var h = harness(config)
            let expected = onRealSensor ? EvaluationMachine.scriptedInputWarning : nil
            XCTAssertEqual(lastScreen(h.start())?.warning, expected)
            XCTAssertEqual(lastScreen(h.send(.noMatch))?.warning, expected)
            XCTAssertEqual(lastScreen(h.send(.fallback))?.warning, expected)
        }
    }

    func testOwnerPolicyWithBiometricsArmsSensorAndAcceptsPasscode() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication))
        let actions = h.start()
        XCTAssertEqual(actions.first, .armSensor)
        let s = lastScreen(actions)
        XCTAssertEqual(s?.instruction, "Touch ID: place your finger on the sensor — or type the device passcode")
        XCTAssertEqual(s?.passcodeEntry, true)
        XCTAssertEqual(s?.sensorArmed, true)
    }

    func testOwnerPolicyWithoutSensorGoesStraightToPasscode() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor))
        let expected = PromptScreen(
            app: Fixture.app,
            reason: Fixture.reason,
            instruction: "Enter the device passcode",
            cancelTitle: "Cancel",
            fallbackTitle: nil,
            passcodeEntry: true,
            retryOffered: false,
            sensorArmed: false,
            sensorName: nil,
            sensorSimulated: true,
            passcodeRetryAfter: nil,
            passcodeDisabled: false
        )
        XCTAssertEqual(h.start(), [.show(expected)])
        XCTAssertFalse(h.machine.isSensorArmed)
    }

    func testOwnerPolicyNotEnrolledGoesStraightToPasscode() {
        var h = harness(
            Fixture.config(
                .deviceOwnerAuthentication,
                DeviceFacts(sensor: .touchID, enrolled: false, passcodeSet: true)
            )
        )
        let actions = h.start()
        XCTAssertFalse(actions.contains(.armSensor))
        XCTAssertEqual(lastScreen(actions)?.passcodeEntry, true)
        XCTAssertEqual(lastScreen(actions)?.sensorArmed, false)
    }

    func testPreflightFailuresFinishAtOnceWithExactCodes() {
        let cases: [(PolicyValue, DeviceFacts, LAErrorCode)] = [
            (
                .deviceOwnerAuthenticationWithBiometrics,
                DeviceFacts(sensor: .none, enrolled: false, passcodeSet: true), .biometryNotAvailable
            ),
            (
                .deviceOwnerAuthenticationWithBiometrics,
                DeviceFacts(sensor: .touchID, enrolled: true, passcodeSet: false), .passcodeNotSet
            ),
            (
                .deviceOwnerAuthenticationWithBiometrics,
                DeviceFacts(sensor: .touchID, enrolled: false, passcodeSet: true), .biometryNotEnrolled
            ),
            (
                .deviceOwnerAuthentication, DeviceFacts(sensor: .touchID, enrolled: true, passcodeSet: false),
                .passcodeNotSet
            ),
            (.deviceOwnerAuthenticationWithCompanion, Fixture.touch, .companionNotAvailable),
            (.deviceOwnerAuthenticationWithBiometricsOrCompanion, Fixture.touch, .companionNotAvailable),
        ]
        for (policy, facts, code) in cases {
            var h = harness(Fixture.config(policy, facts))
            let actions = h.start()
            XCTAssertEqual(actions.count, 1, "\(policy) \(facts): \(actions)")
            XCTAssertEqual(errorCode(actions), code, "\(policy) \(facts)")
            XCTAssertTrue(h.machine.isFinished)
        }
    }

    // MARK: Touch ID

    func testTouchIDBiometricPolicyThreeFailuresEndWithAuthenticationFailed() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        _ = h.start()
        let first = h.send(.noMatch)
        XCTAssertEqual(first.count, 2)
        XCTAssertEqual(first.first, .persistLedger)
        XCTAssertEqual(lastScreen(first)?.instruction, "Touch ID: no match. Try Again")
        XCTAssertEqual(lastScreen(first)?.sensorArmed, true)
        let second = h.send(.noMatch)
        XCTAssertEqual(second.first, .persistLedger)
        XCTAssertNil(outcome(second))
        XCTAssertEqual(
            h.send(.noMatch),
            [
                .persistLedger, .disarmSensor,
                .finish(.failure(.authenticationFailed, "Application retry limit exceeded.")),
            ]
        )
        XCTAssertEqual(h.ledger.biometricFailures, 3)
        XCTAssertNil(h.ledger.biometryLock)
        XCTAssertTrue(h.machine.isFinished)
        XCTAssertEqual(EvaluationMachine.touchIDAttemptsPerEvaluation, 3)
    }

    func testTouchIDOwnerPolicyThreeFailuresGoToPasscode() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication))
        _ = h.start()
        _ = h.send(.noMatch)
        _ = h.send(.noMatch)
        let third = h.send(.noMatch)
        XCTAssertEqual(Array(third.prefix(2)), [.persistLedger, .disarmSensor])
        XCTAssertEqual(third.count, 3)
        let s = lastScreen(third)
        XCTAssertEqual(s?.passcodeEntry, true)
        XCTAssertEqual(s?.sensorArmed, false)
        XCTAssertEqual(s?.fallbackTitle, nil, "the passcode phase has no fallback button")
        XCTAssertEqual(s?.instruction, "Enter the device passcode")
        XCTAssertFalse(h.machine.isFinished)
        XCTAssertTrue(isIgnored(h.send(.match)), "the sensor is no longer armed")
        XCTAssertEqual(
            h.typePasscode(correct: true, attempt: Data([1])),
            [.persistLedger, .finish(.success(.passcode))]
        )
    }

    func testFallbackHiddenBeforeFirstTouchIDFailure() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        XCTAssertNil(lastScreen(h.start())?.fallbackTitle)
        XCTAssertTrue(isIgnored(h.send(.fallback)))
        XCTAssertFalse(h.machine.isFinished)
    }

    func testFallbackAppearsAfterFirstTouchIDFailureWithDefaultTitle() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        _ = h.start()
        XCTAssertEqual(lastScreen(h.send(.noMatch))?.fallbackTitle, "Enter Password")
    }

    func testFallbackUsesCustomTitle() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication, fallbackTitle: "Use Passcode"))
        _ = h.start()
        XCTAssertEqual(lastScreen(h.send(.noMatch))?.fallbackTitle, "Use Passcode")
    }

    func testEmptyFallbackTitleHidesTheButton() {
        for policy in [PolicyValue.deviceOwnerAuthenticationWithBiometrics, .deviceOwnerAuthentication] {
            var h = harness(Fixture.config(policy, fallbackTitle: ""))
            _ = h.start()
            XCTAssertNil(lastScreen(h.send(.noMatch))?.fallbackTitle, "\(policy)")
            XCTAssertNil(lastScreen(h.send(.noMatch))?.fallbackTitle, "\(policy)")
            XCTAssertTrue(isIgnored(h.send(.fallback)), "\(policy)")
            XCTAssertFalse(h.machine.isFinished)
        }
    }

    func testFallbackWithBiometricPolicyEndsWithUserFallback() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        _ = h.start()
        _ = h.send(.noMatch)
        let before = h.ledger
        XCTAssertEqual(
            h.send(.fallback),
            [.disarmSensor, .finish(.failure(.userFallback, "Fallback authentication mechanism selected."))]
        )
        XCTAssertEqual(h.ledger, before, "fallback is not a failure")
    }

    func testFallbackWithOwnerPolicySwitchesToPasscode() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication))
        _ = h.start()
        _ = h.send(.noMatch)
        let actions = h.send(.fallback)
        XCTAssertEqual(actions.count, 2)
        XCTAssertEqual(actions.first, .disarmSensor)
        XCTAssertEqual(lastScreen(actions)?.instruction, "Enter the device passcode")
        XCTAssertEqual(lastScreen(actions)?.passcodeEntry, true)
        XCTAssertNil(outcome(actions))
        XCTAssertEqual(h.ledger.biometricFailures, 1)
    }

    func testCustomAndEmptyCancelTitles() {
        var custom = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, cancelTitle: "Not Now"))
        XCTAssertEqual(lastScreen(custom.start())?.cancelTitle, "Not Now")
        var empty = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, cancelTitle: ""))
        XCTAssertEqual(lastScreen(empty.start())?.cancelTitle, "Cancel")
    }

    // MARK: Face ID

    func testFaceIDFirstFailureOffersRetryWithSensorDisarmed() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, Fixture.face))
        XCTAssertEqual(lastScreen(h.start())?.instruction, "Face ID: look at the camera")
        let actions = h.send(.noMatch)
        XCTAssertEqual(Array(actions.prefix(2)), [.persistLedger, .disarmSensor])
        let s = lastScreen(actions)
        XCTAssertEqual(s?.retryOffered, true)
        XCTAssertEqual(s?.sensorArmed, false)
        XCTAssertNil(s?.fallbackTitle, "Face ID offers retry or cancel after the first failure")
        XCTAssertEqual(s?.instruction, "Face Not Recognized")
        XCTAssertFalse(h.machine.isSensorArmed)
        XCTAssertTrue(isIgnored(h.send(.fallback)))
    }

    func testFaceIDSensorEventsWhileDisarmedAreIgnored() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, Fixture.face))
        _ = h.start()
        _ = h.send(.noMatch)
        let before = h.ledger
        XCTAssertTrue(isIgnored(h.send(.noMatch)), "no face is scanned until the user asks to retry")
        XCTAssertTrue(isIgnored(h.send(.match)), "no face is scanned until the user asks to retry")
        XCTAssertEqual(h.ledger, before)
        XCTAssertFalse(h.machine.isFinished)
    }

    func testFaceIDRetryRearmsSensor() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, Fixture.face))
        _ = h.start()
        XCTAssertTrue(isIgnored(h.send(.retry)), "no retry offered before a failure")
        _ = h.send(.noMatch)
        let actions = h.send(.retry)
        XCTAssertEqual(actions.first, .armSensor)
        XCTAssertEqual(actions.count, 2)
        XCTAssertEqual(lastScreen(actions)?.sensorArmed, true)
        XCTAssertEqual(lastScreen(actions)?.retryOffered, false)
        XCTAssertEqual(h.send(.match), [.persistLedger, .disarmSensor, .finish(.success(.biometric))])
        XCTAssertEqual(h.ledger.biometricFailures, 0)
    }

    func testFaceIDSecondFailureBiometricPolicyStopsTryingAndWaitsForCancelOrFallback() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, Fixture.face))
        _ = h.start()
        _ = h.send(.noMatch)
        _ = h.send(.retry)
        let actions = h.send(.noMatch)
        XCTAssertEqual(Array(actions.prefix(2)), [.persistLedger, .disarmSensor])
        XCTAssertNil(outcome(actions))
        let s = lastScreen(actions)
        XCTAssertEqual(s?.fallbackTitle, "Enter Password")
        XCTAssertEqual(s?.retryOffered, false)
        XCTAssertEqual(s?.sensorArmed, false)
        XCTAssertEqual(h.ledger.biometricFailures, 2)
        // Face ID is not tried again in this evaluation.
        XCTAssertTrue(isIgnored(h.send(.retry)))
        XCTAssertTrue(isIgnored(h.send(.match)))
        XCTAssertTrue(isIgnored(h.send(.noMatch)))
        XCTAssertEqual(h.ledger.biometricFailures, 2)
        XCTAssertFalse(h.machine.isFinished)
        XCTAssertEqual(
            h.send(.fallback),
            [.finish(.failure(.userFallback, "Fallback authentication mechanism selected."))]
        )
    }

    func testFaceIDExhaustedCancelEndsWithUserCancel() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, Fixture.face, fallbackTitle: ""))
        _ = h.start()
        _ = h.send(.noMatch)
        _ = h.send(.retry)
        XCTAssertNil(lastScreen(h.send(.noMatch))?.fallbackTitle, "\"\" hides the fallback here too")
        XCTAssertTrue(isIgnored(h.send(.fallback)))
        XCTAssertEqual(h.send(.cancel), [.finish(.failure(.userCancel, "Canceled by user."))])
    }

    func testFaceIDSecondFailureOwnerPolicyGoesToPasscode() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication, Fixture.face))
        _ = h.start()
        _ = h.send(.noMatch)
        _ = h.send(.retry)
        let actions = h.send(.noMatch)
        XCTAssertEqual(Array(actions.prefix(2)), [.persistLedger, .disarmSensor])
        XCTAssertEqual(lastScreen(actions)?.instruction, "Enter the device passcode")
        XCTAssertEqual(lastScreen(actions)?.passcodeEntry, true)
        XCTAssertEqual(lastScreen(actions)?.retryOffered, false)
        XCTAssertTrue(isIgnored(h.send(.retry)))
        XCTAssertEqual(EvaluationMachine.faceIDAttemptsPerEvaluation, 2)
    }

    // MARK: Lockout across evaluations

    func testFiveTouchIDFailuresAcrossEvaluationsLockBiometry() {
        var first = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        _ = first.start()
        for _ in 0..<3 { _ = first.send(.noMatch) }
        XCTAssertEqual(first.ledger.biometricFailures, 3)

        var second = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics), first.ledger)
        _ = second.start()
        XCTAssertNil(outcome(second.send(.noMatch)))
        XCTAssertEqual(
            second.send(.noMatch),
            [.persistLedger, .disarmSensor, .finish(.failure(.biometryLockout, lockoutMessage))]
        )
        XCTAssertEqual(second.ledger.biometricFailures, 5)
        XCTAssertEqual(second.ledger.biometryLock, .failures)

        var third = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics), second.ledger)
        XCTAssertEqual(third.start(), [.finish(.failure(.biometryLockout, lockoutMessage))])
    }

    func testFiveFaceIDFailuresAcrossEvaluationsLockBiometry() {
        var ledger = AttemptLedger()
        for _ in 0..<2 {
            var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, Fixture.face), ledger)
            _ = h.start()
            _ = h.send(.noMatch)
            _ = h.send(.retry)
            _ = h.send(.noMatch)
            _ = h.send(.cancel)
            ledger = h.ledger
        }
        XCTAssertEqual(ledger.biometricFailures, 4)
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, Fixture.face), ledger)
        _ = h.start()
        XCTAssertEqual(
            h.send(.noMatch),
            [.persistLedger, .disarmSensor, .finish(.failure(.biometryLockout, lockoutMessage))]
        )
    }

    func testLockoutDuringOwnerEvaluationGoesToPasscode() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication), .withBiometricFailures(4))
        _ = h.start()
        let actions = h.send(.noMatch)
        XCTAssertEqual(Array(actions.prefix(2)), [.persistLedger, .disarmSensor])
        XCTAssertEqual(lastScreen(actions)?.passcodeEntry, true)
        XCTAssertNil(outcome(actions))
        XCTAssertEqual(h.ledger.biometryLock, .failures)
    }

    func testOwnerPolicyWhenLockedOutStartsWithPasscodeWithoutArming() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication), .withBiometricFailures(5))
        let actions = h.start()
        XCTAssertEqual(actions.count, 1)
        XCTAssertEqual(lastScreen(actions)?.sensorArmed, false)
        XCTAssertEqual(lastScreen(actions)?.instruction, "Enter the device passcode")
    }

    func testCorrectPasscodeClearsLockoutAndBiometricsWorkAgain() {
        var owner = harness(Fixture.config(.deviceOwnerAuthentication), .withBiometricFailures(5))
        _ = owner.start()
        XCTAssertEqual(
            owner.typePasscode(correct: true, attempt: Data([7])),
            [.persistLedger, .finish(.success(.passcode))]
        )
        XCTAssertNil(owner.ledger.biometryLock)
        XCTAssertEqual(owner.ledger.biometricFailures, 0)
        var bio = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics), owner.ledger)
        XCTAssertEqual(bio.start().first, .armSensor)
    }

    func testWrongPasscodeDoesNotClearLockout() {
        var owner = harness(Fixture.config(.deviceOwnerAuthentication), .withBiometricFailures(5))
        _ = owner.start()
        _ = owner.typePasscode(correct: false, attempt: Fixture.wrong(1))
        XCTAssertEqual(owner.ledger.biometryLock, .failures)
    }

    func testMatchResetsConsecutiveFailures() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics), .withBiometricFailures(4))
        _ = h.start()
        XCTAssertEqual(h.send(.match), [.persistLedger, .disarmSensor, .finish(.success(.biometric))])
        XCTAssertEqual(h.ledger.biometricFailures, 0)
        XCTAssertEqual(h.ledger.lastBiometricMatch, clock.monotonic())
        XCTAssertEqual(h.ledger.lastOwnerAuthentication, clock.wall())
    }

    // MARK: Passcode phase

    func testWrongPasscodeCountsPersistsAndSaysSo() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor))
        _ = h.start()
        let actions = h.typePasscode(correct: false, attempt: Fixture.wrong(1))
        XCTAssertEqual(actions.count, 2)
        XCTAssertEqual(actions.first, .persistLedger)
        XCTAssertEqual(lastScreen(actions)?.instruction, "Wrong passcode. Try again.")
        XCTAssertEqual(h.ledger.passcodeFailures, 1)
        XCTAssertFalse(h.machine.isFinished)
    }

    func testARemoteLockDuringAnOpenPromptRefusesTheNextTouch() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        _ = h.start()
        h.ledger.remoteLock()
        let actions = h.send(.match)
        XCTAssertEqual(actions.last, .finish(.failure(.biometryLockout, Preflight.lockoutMessage(.remoteLock))))
        XCTAssertNil(h.ledger.lastBiometricMatch, "a refused touch must not open the reuse window")
    }

    func testARemoteLockDuringAnOwnerPromptMovesToThePasscode() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication))
        _ = h.start()
        h.ledger.remoteLock()
        let actions = h.send(.noMatch)
        XCTAssertEqual(h.ledger.biometricFailures, 0, "a refused touch does not count")
        XCTAssertEqual(lastScreen(actions)?.sensorArmed, false)
        XCTAssertEqual(lastScreen(actions)?.passcodeEntry, true)
    }

    func testInputDescriptionsNeverShowAPasscode() {
        XCTAssertFalse("\(EvaluationMachine.Input.passcodeTyped("271828"))".contains("271828"))
        XCTAssertFalse("\([EvaluationMachine.Input.passcodeTyped("271828")])".contains("271828"))
    }

    func testWrongPasscodeTypedWhileTheSensorIsArmedSaysSoAndKeepsTheSensorArmed() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication))
        _ = h.start()
        let actions = h.typePasscode(correct: false, attempt: Fixture.wrong(1))
        XCTAssertEqual(actions.first, .persistLedger)
        XCTAssertEqual(lastScreen(actions)?.instruction, "Wrong passcode. Try again. — or use Touch ID")
        XCTAssertEqual(lastScreen(actions)?.sensorArmed, true)
        let next = h.send(.noMatch)
        XCTAssertEqual(lastScreen(next)?.instruction, "Touch ID: no match. Try Again — or type the device passcode")
    }

    func testSameWrongPasscodeTwiceCountsOnce() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor))
        _ = h.start()
        _ = h.typePasscode(correct: false, attempt: Fixture.wrong(1))
        _ = h.typePasscode(correct: false, attempt: Fixture.wrong(1))
        XCTAssertEqual(h.ledger.passcodeFailures, 1)
        _ = h.typePasscode(correct: false, attempt: Fixture.wrong(2))
        XCTAssertEqual(h.ledger.passcodeFailures, 2)
    }

    func testFifthWrongPasscodeStartsOneMinuteDelay() {
        var h = harness(
            Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor),
            .withPasscodeFailures(4, clock: clock)
        )
        _ = h.start()
        let s = lastScreen(h.typePasscode(correct: false, attempt: Fixture.wrong(50)))
        XCTAssertEqual(h.ledger.passcodeFailures, 5)
        XCTAssertEqual(s?.passcodeRetryAfter, 60)
        XCTAssertEqual(s?.instruction, "Passcode entry is delayed. Try again in 1 min 0 s")
        XCTAssertEqual(s?.passcodeDisabled, false)
    }

    func testAttemptDuringDelayIsRefusedWithoutCheckingOrCounting() {
        var h = harness(
            Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor),
            .withPasscodeFailures(5, clock: clock)
        )
        XCTAssertEqual(lastScreen(h.start())?.passcodeRetryAfter, 60)
        clock.advance(20)
        let before = h.ledger
        let refused = h.send(.passcodeTyped("0000"))
        XCTAssertEqual(refused.count, 1)
        guard case .show(let s)? = refused.first else { return XCTFail("expected .show, got \(refused)") }
        XCTAssertEqual(s.passcodeRetryAfter, 40)
        XCTAssertEqual(s.instruction, "Passcode entry is delayed. Try again in 40 s")
        XCTAssertEqual(h.ledger, before, "a refused attempt does not count")
        XCTAssertEqual(h.ledger.passcodeFailures, 5)
        clock.advance(40)
        XCTAssertEqual(h.send(.passcodeTyped("0000")), [.checkPasscode("0000")])
    }

    func testSixthFailureDelaysFiveMinutesThenFifteenThenHour() {
        var h = harness(
            Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor),
            .withPasscodeFailures(5, clock: clock)
        )
        _ = h.start()
        let expected: [Double] = [300, 900, 900, 3600]
        for (i, delay) in expected.enumerated() {
            if case .wait(let s) = h.ledger.passcodeGate(now: clock.monotonic()) { clock.advance(s) }
            let s = lastScreen(h.typePasscode(correct: false, attempt: Fixture.wrong(200 + i)))
            XCTAssertEqual(s?.passcodeRetryAfter, delay, "after \(6 + i) failures")
        }
        XCTAssertEqual(h.ledger.passcodeFailures, 9)
        XCTAssertEqual(
            lastScreen(h.send(.passcodeTyped("x1234")))?.instruction,
            "Passcode entry is delayed. Try again in 1 h 0 min"
        )
    }

    func testTenthFailureDisablesPasscodeEntry() {
        var h = harness(
            Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor),
            .withPasscodeFailures(9, clock: clock)
        )
        _ = h.start()
        clock.advance(3600)
        let s = lastScreen(h.typePasscode(correct: false, attempt: Fixture.wrong(300)))
        XCTAssertEqual(h.ledger.passcodeFailures, 10)
        XCTAssertEqual(s?.passcodeDisabled, true)
        XCTAssertEqual(s?.passcodeEntry, false)
        XCTAssertNil(s?.passcodeRetryAfter)
        clock.advance(10 * 24 * 3600)
        let refused = h.send(.passcodeTyped("1234"))
        XCTAssertEqual(refused.count, 1)
        XCTAssertEqual(lastScreen(refused)?.passcodeDisabled, true)
        XCTAssertEqual(h.ledger.passcodeFailures, 10)
    }

    func testAdministratorResetReopensPasscodeEntry() {
        var ledger = AttemptLedger.withPasscodeFailures(10, clock: clock)
        ledger.administratorReset()
        var h = harness(Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor), ledger)
        let s = lastScreen(h.start())
        XCTAssertEqual(s?.passcodeDisabled, false)
        XCTAssertEqual(s?.passcodeEntry, true)
        XCTAssertEqual(h.send(.passcodeTyped("1234")), [.checkPasscode("1234")])
    }

    func testDelaySurvivesDaemonRestartMidEvaluation() throws {
        var h = harness(
            Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor),
            .withPasscodeFailures(4, clock: clock)
        )
        _ = h.start()
        _ = h.typePasscode(correct: false, attempt: Fixture.wrong(40))
        clock.advance(15)
        // The daemon restarts: the ledger is reloaded from storage and a new evaluation begins.
        var restored = try JSONDecoder().decode(AttemptLedger.self, from: JSONEncoder().encode(h.ledger))
        _ = restored.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false)
        var again = harness(Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor), restored)
        XCTAssertEqual(lastScreen(again.start())?.passcodeRetryAfter, 45)
        XCTAssertEqual(again.send(.passcodeTyped("1234")).count, 1)
        XCTAssertEqual(again.ledger.passcodeFailures, 5)
    }

    func testRebootRestartsDelayInMachine() throws {
        var ledger = AttemptLedger()
        _ = ledger.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false)
        for i in 0..<5 { ledger.recordPasscodeFailure(attempt: Fixture.wrong(i), now: clock.monotonic()) }
        clock.advance(50)
        clock.reboot(bootID: "boot-2")
        var restored = try JSONDecoder().decode(AttemptLedger.self, from: JSONEncoder().encode(ledger))
        _ = restored.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false)
        var h = harness(Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor), restored)
        XCTAssertEqual(lastScreen(h.start())?.passcodeRetryAfter, 60)
    }

    func testPasscodeTypedWhileSensorArmedInOwnerPolicy() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication))
        _ = h.start()
        XCTAssertEqual(h.send(.passcodeTyped("1234")), [.checkPasscode("1234")])
        XCTAssertEqual(
            h.send(.passcodeChecked(correct: true, attempt: Data([1]))),
            [.persistLedger, .disarmSensor, .finish(.success(.passcode))]
        )
    }

    func testPasscodeIgnoredForBiometricPolicy() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        _ = h.start()
        XCTAssertTrue(isIgnored(h.send(.passcodeTyped("1234"))))
        let before = h.ledger
        XCTAssertTrue(isIgnored(h.send(.passcodeChecked(correct: true, attempt: Data([1])))))
        XCTAssertEqual(h.ledger, before)
        XCTAssertFalse(h.machine.isFinished)
    }

    func testEmptyPasscodeIgnored() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor))
        _ = h.start()
        XCTAssertTrue(isIgnored(h.send(.passcodeTyped(""))))
    }

    // MARK: Boot, inactivity, remote lock

    private func ledgerAfterSecondBoot() -> AttemptLedger {
        var l = AttemptLedger()
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true)
        l.recordPasscodeSuccess(wall: clock.wall())
        clock.reboot(bootID: "boot-2")
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true)
        return l
    }

    func testBootRefusesBiometricPolicy() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics), ledgerAfterSecondBoot())
        XCTAssertEqual(h.start(), [.finish(.failure(.biometryLockout, Preflight.lockoutMessage(.boot)))])
    }

    func testBootSendsOwnerPolicyToPasscodeWhichClearsIt() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication), ledgerAfterSecondBoot())
        XCTAssertFalse(h.start().contains(.armSensor))
        _ = h.typePasscode(correct: true, attempt: Data([1]))
        XCTAssertNil(h.ledger.biometryRefusal(now: clock.wall()))
        var bio = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics), h.ledger)
        XCTAssertEqual(bio.start().first, .armSensor)
    }

    func testInactivityRefusesBiometricPolicyAndOwnerGoesToPasscode() {
        var ledger = AttemptLedger()
        ledger.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: Fixture.app)
        clock.advance(48 * 3600 + 60)
        var bio = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics), ledger)
        XCTAssertEqual(bio.start(), [.finish(.failure(.biometryLockout, Preflight.lockoutMessage(.inactivity)))])
        var owner = harness(Fixture.config(.deviceOwnerAuthentication), ledger)
        let actions = owner.start()
        XCTAssertFalse(actions.contains(.armSensor))
        XCTAssertEqual(lastScreen(actions)?.sensorArmed, false)
    }

    func testRemoteLockRefusesBiometricPolicy() {
        var ledger = AttemptLedger()
        ledger.remoteLock()
        var bio = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics), ledger)
        XCTAssertEqual(bio.start(), [.finish(.failure(.biometryLockout, Preflight.lockoutMessage(.remoteLock)))])
        var owner = harness(Fixture.config(.deviceOwnerAuthentication), ledger)
        XCTAssertFalse(owner.start().contains(.armSensor))
        _ = owner.typePasscode(correct: true, attempt: Data([1]))
        XCTAssertNil(owner.ledger.biometryLock)
    }

    // MARK: Reuse

    private func ledgerWithMatch() -> AttemptLedger {
        var l = AttemptLedger()
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: Fixture.app)
        return l
    }

    func testReuseWithinWindowSucceedsWithoutPrompt() {
        let ledger = ledgerWithMatch()
        clock.advance(100)
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, reuse: 120), ledger)
        XCTAssertEqual(h.start(), [.finish(.success(.reused))])
        XCTAssertEqual(h.ledger, ledger, "reuse does not extend its own window")
    }

    func testReuseOutsideWindowPrompts() {
        let ledger = ledgerWithMatch()
        clock.advance(121)
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, reuse: 120), ledger)
        XCTAssertEqual(h.start().first, .armSensor)
    }

    func testReuseDurationClampsToThreeHundredSeconds() {
        let ledger = ledgerWithMatch()
        clock.advance(300)
        var inside = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, reuse: 3600), ledger)
        XCTAssertEqual(inside.start(), [.finish(.success(.reused))])
        clock.advance(1)
        var outside = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, reuse: 3600), ledger)
        XCTAssertEqual(outside.start().first, .armSensor)
    }

    func testZeroReuseDurationAlwaysPrompts() {
        let ledger = ledgerWithMatch()
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, reuse: 0), ledger)
        XCTAssertEqual(h.start().first, .armSensor)
    }

    func testReuseNotAcrossBoots() {
        let ledger = ledgerWithMatch()
        clock.reboot(bootID: "boot-2", after: 1)
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, reuse: 300), ledger)
        XCTAssertEqual(h.start().first, .armSensor)
    }

    func testReuseNotWhenLockedOut() {
        var ledger = ledgerWithMatch()
        for _ in 0..<5 { ledger.recordBiometricFailure() }
        clock.advance(10)
        var bio = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, reuse: 300), ledger)
        XCTAssertEqual(bio.start(), [.finish(.failure(.biometryLockout, lockoutMessage))])
        var owner = harness(Fixture.config(.deviceOwnerAuthentication, reuse: 300), ledger)
        let actions = owner.start()
        XCTAssertNil(outcome(actions), "owner policy must ask for the passcode, not reuse")
        XCTAssertEqual(lastScreen(actions)?.passcodeEntry, true)
    }

    func testReuseNotWhenRemotelyLocked() {
        var ledger = ledgerWithMatch()
        ledger.remoteLock()
        var bio = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, reuse: 300), ledger)
        XCTAssertEqual(errorCode(bio.start()), .biometryLockout)
    }

    // MARK: interactionNotAllowed

    func testInteractionNotAllowedFailsWithNotInteractive() {
        for policy in [PolicyValue.deviceOwnerAuthenticationWithBiometrics, .deviceOwnerAuthentication] {
            var h = harness(Fixture.config(policy, interactionNotAllowed: true))
            XCTAssertEqual(
                h.start(),
                [.finish(.failure(.notInteractive, "User interaction is required."))],
                "\(policy)"
            )
        }
        var passcodeOnly = harness(
            Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor, interactionNotAllowed: true)
        )
        XCTAssertEqual(errorCode(passcodeOnly.start()), .notInteractive)
    }

    func testInteractionNotAllowedStillReuses() {
        let ledger = ledgerWithMatch()
        clock.advance(5)
        var h = harness(
            Fixture.config(.deviceOwnerAuthenticationWithBiometrics, reuse: 60, interactionNotAllowed: true),
            ledger
        )
        XCTAssertEqual(h.start(), [.finish(.success(.reused))])
    }

    func testInteractionNotAllowedStillHonoursContextAuthorization() {
        let auth = ContextAuthorization(at: clock.monotonic(), biometric: false)
        clock.advance(5)
        var h = harness(Fixture.config(.deviceOwnerAuthentication, interactionNotAllowed: true, authorization: auth))
        XCTAssertEqual(h.start(), [.finish(.success(.contextAuthorized))])
    }

    func testPreflightErrorWinsOverNotInteractive() {
        var h = harness(
            Fixture.config(.deviceOwnerAuthenticationWithBiometrics, interactionNotAllowed: true),
            .withBiometricFailures(5)
        )
        XCTAssertEqual(errorCode(h.start()), .biometryLockout)
    }

    // MARK: Context authorization

    func testAuthorizedContextSucceedsWithoutPrompt() {
        let auth = ContextAuthorization(at: clock.monotonic(), biometric: true)
        clock.advance(299)
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, authorization: auth))
        XCTAssertEqual(h.start(), [.finish(.success(.contextAuthorized))])
    }

    func testExpiredContextAuthorizationPrompts() {
        let auth = ContextAuthorization(at: clock.monotonic(), biometric: true)
        clock.advance(31)
        var h = harness(Fixture.config(.deviceOwnerAuthentication, authorization: auth, lifetime: 30))
        XCTAssertEqual(h.start().first, .armSensor)
    }

    func testPasscodeAuthorizedContextDoesNotSatisfyBiometricPolicy() {
        let auth = ContextAuthorization(at: clock.monotonic(), biometric: false)
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, authorization: auth))
        XCTAssertEqual(h.start().first, .armSensor)
    }

    // MARK: Cancellation

    func testUserCancel() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        _ = h.start()
        let before = h.ledger
        XCTAssertEqual(h.send(.cancel), [.disarmSensor, .finish(.failure(.userCancel, "Canceled by user."))])
        XCTAssertEqual(h.ledger, before, "cancel is not a failed attempt")
        XCTAssertFalse(h.machine.isSensorArmed)
    }

    func testAppCancel() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication))
        _ = h.start()
        XCTAssertEqual(h.send(.appCancel), [.disarmSensor, .finish(.failure(.appCancel, "Invalidated by client."))])
        var p = harness(Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor))
        _ = p.start()
        XCTAssertEqual(p.send(.appCancel), [.finish(.failure(.appCancel, "Invalidated by client."))])
    }

    func testSystemCancelCarriesItsReason() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics, Fixture.face))
        _ = h.start()
        XCTAssertEqual(
            h.send(.systemCancel("Canceled by another authentication.")),
            [.disarmSensor, .finish(.failure(.systemCancel, "Canceled by another authentication."))]
        )
    }

    func testInputsAfterFinishAreIgnored() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        _ = h.start()
        _ = h.send(.cancel)
        let before = h.ledger
        for input in [
            EvaluationMachine.Input.match, .noMatch, .cancel, .fallback, .retry, .passcodeTyped("1234"),
            .passcodeChecked(correct: true, attempt: Data([1])), .appCancel, .systemCancel("x"),
        ] {
            XCTAssertTrue(isIgnored(h.send(input)), "\(input)")
        }
        XCTAssertEqual(h.ledger, before)
    }

    func testInputsBeforeStartAreIgnored() {
        var h = harness(Fixture.config(.deviceOwnerAuthenticationWithBiometrics))
        XCTAssertTrue(isIgnored(h.send(.noMatch)))
        XCTAssertEqual(h.ledger.biometricFailures, 0)
    }

    // MARK: Persistence ordering

    /// A seeded random walk over every input in every configuration; the harness asserts after
    /// each step that a changed ledger is followed by .persistLedger before any .show / .finish.
    func testEveryLedgerChangeIsPersistedBeforeAnythingVisible() {
        var rng = SplitMix(seed: 0x5EED)
        let inputs: [EvaluationMachine.Input] = [
            .match, .noMatch, .noMatch, .noMatch, .retry, .fallback, .cancel,
            .passcodeTyped("1234"), .passcodeChecked(correct: false, attempt: Data([1])),
            .passcodeChecked(correct: false, attempt: Data([2])),
            .passcodeChecked(correct: true, attempt: Data([3])),
        ]
        let configs = [
            Fixture.config(.deviceOwnerAuthenticationWithBiometrics), Fixture.config(.deviceOwnerAuthentication),
            Fixture.config(.deviceOwnerAuthenticationWithBiometrics, Fixture.face),
            Fixture.config(.deviceOwnerAuthentication, Fixture.face),
            Fixture.config(.deviceOwnerAuthentication, Fixture.noSensor),
        ]
        var ledger = AttemptLedger()
        var changes = 0
        for round in 0..<400 {
            var h = harness(configs[round % configs.count], ledger)
            _ = h.start()
            var steps = 0
            while !h.machine.isFinished && steps < 12 {
                let before = h.ledger
                _ = h.send(inputs[Int(rng.next() % UInt64(inputs.count))])
                if h.ledger != before { changes += 1 }
                clock.advance(Double(rng.next() % 120))
                steps += 1
            }
            ledger = h.ledger
            if ledger.passcodeGate(now: clock.monotonic()) == .disabled { ledger.administratorReset() }
        }
        XCTAssertGreaterThan(changes, 200, "the walk must actually exercise ledger changes")
    }

    // MARK: The login password (a PAM authentication)

    private func loginPasswordConfig(
        _ policy: PolicyValue = .deviceOwnerAuthentication
    ) -> EvaluationMachine.Configuration {
        var config = Fixture.config(policy)
        config.secret = .loginPassword
        return config
    }

    /// The login password is checked and counted by the shell on its own counter: the device
    /// passcode's gate does not hold it back, its result moves nothing in the ledger, and the
    /// prompt says "password".
    func testTheLoginPasswordIsCountedByTheShellNotTheLedger() {
        var ledger = AttemptLedger()
        for i in 1...10 { _ = ledger.recordPasscodeFailure(attempt: Fixture.wrong(i), now: clock.monotonic()) }
        XCTAssertEqual(ledger.passcodeGate(now: clock.monotonic()), .disabled, "the device passcode is disabled")
        var h = harness(loginPasswordConfig(), ledger)
        let start = h.start()
        XCTAssertEqual(
            lastScreen(start)?.instruction,
            "Touch ID: place your finger on the sensor — or type your password"
        )
        XCTAssertEqual(lastScreen(start)?.secretName, "password")
        XCTAssertEqual(lastScreen(start)?.passcodeEntry, true, "the device passcode's lockout is not the password's")
        XCTAssertEqual(h.send(.passcodeTyped("typed")), [.checkPasscode("typed")])
        let before = h.ledger
        let wrong = h.send(.loginPasswordChecked(.wrong(retryAfter: nil)))
        XCTAssertFalse(wrong.contains(.persistLedger))
        XCTAssertEqual(h.ledger, before, "the shell's counter counted it")
        XCTAssertEqual(lastScreen(wrong)?.instruction, "Wrong password. Try again. — or use Touch ID")
        XCTAssertEqual(lastScreen(wrong)?.sensorArmed, true, "the finger still passes")
        let delayed = h.send(.loginPasswordChecked(.delayed(61)))
        XCTAssertEqual(lastScreen(delayed)?.passcodeRetryAfter, 61)
        XCTAssertEqual(
            lastScreen(delayed)?.instruction,
            "Password entry is delayed. Try again in 1 min 1 s — or use Touch ID"
        )
        XCTAssertEqual(
            h.send(.passcodeChecked(correct: true, attempt: nil)),
            [.ignored("a passcode result where this policy takes none")],
            "a device passcode's result means nothing here"
        )
        XCTAssertEqual(h.send(.loginPasswordChecked(.accepted)), [.disarmSensor, .finish(.success(.passcode))])
    }

    /// With the finger locked out the password alone is asked; it passes, and lifts no lockout:
    /// the login password is not the device passcode (our rule).
    func testTheLoginPasswordPassesWithTheFingerLockedAndLiftsNoLockout() {
        var ledger = AttemptLedger()
        for _ in 1...5 { _ = ledger.recordBiometricFailure() }
        var h = harness(loginPasswordConfig(), ledger)
        let start = h.start()
        XCTAssertFalse(start.contains(.armSensor))
        XCTAssertEqual(lastScreen(start)?.instruction, "Enter your password")
        XCTAssertEqual(h.send(.passcodeTyped("typed")), [.checkPasscode("typed")])
        XCTAssertEqual(h.send(.loginPasswordChecked(.accepted)), [.finish(.success(.passcode))])
        XCTAssertNotNil(h.ledger.biometryRefusal(now: clock.wall()), "still locked out")
    }

    /// An evaluation of the device passcode takes no login password's result.
    func testADevicePasscodeEvaluationIgnoresALoginPasswordResult() {
        var h = harness(Fixture.config(.deviceOwnerAuthentication))
        _ = h.start()
        XCTAssertEqual(
            h.send(.loginPasswordChecked(.accepted)),
            [.ignored("a login password result where this evaluation takes none")]
        )
    }

}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
