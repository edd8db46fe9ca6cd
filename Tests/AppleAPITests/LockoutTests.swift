import EnclaveClient
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

/// behavior.md §3 across contexts, apps, restarts and SIGKILL.
final class LockoutTests: XCTestCase {
    func testFiveFailuresAcrossTwoContextsLockBiometry() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(.nomatch, .nomatch, .nomatch)
        let first = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertEqual(first, .authenticationFailed)
        try enclave.queue(.nomatch, .nomatch)
        let second = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertEqual(second, .biometryLockout, "the 5th consecutive failure locks biometry at once")
        enclave.run {
            XCTAssertEqual(canEvaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics), .biometryLockout)
            XCTAssertEqual(
                LAEnvironment.currentUser.state.biometry?.isLockedOut,
                true,
                "lockout is visible without a prompt"
            )
        }
        XCTAssertEqual(try enclave.status().biometryLockout, "failures")
    }

    func testLockoutIsVisibleThroughLAEnvironmentWithoutAPrompt() throws {
        let enclave = try TestEnclave()
        try enclave.queue(Array(repeating: .nomatch, count: 5))
        try enclave.run {
            _ = evaluateBlocking(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            _ = evaluateBlocking(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            let state = LAEnvironment.currentUser.state
            XCTAssertEqual(state.biometry?.isLockedOut, true)
            XCTAssertEqual(state.biometry?.isUsable, false)
            XCTAssertEqual(state.userPassword?.isSet, true)
            XCTAssertEqual(try enclave.status().biometricFailures, 5)
        }
    }

    func testOwnerPolicyGoesStraightToThePasscodeWhenLockedAndThePasscodeClearsTheLockout() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(Array(repeating: .nomatch, count: 5))
        _ = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        _ = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertNotNil(try enclave.status().biometryLockout)
        // A match queued first must be ignored: the sensor is not armed while locked out.
        try enclave.queue(.match, .passcode("1234"))
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthentication) }
        XCTAssertNil(code)
        let s = try enclave.status()
        XCTAssertNil(s.biometryLockout)
        XCTAssertEqual(s.biometricFailures, 0)
    }

    func testAMatchResetsTheConsecutiveFailureCounter() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(.nomatch, .nomatch, .match)
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertNil(code)
        XCTAssertEqual(try enclave.status().biometricFailures, 0)
    }

    func testLockoutSurvivesARestartAndASIGKILL() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(Array(repeating: .nomatch, count: 5))
        _ = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        _ = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        try enclave.restart()
        XCTAssertEqual(try enclave.status().biometryLockout, "failures")
        enclave.kill()
        try enclave.start()
        XCTAssertEqual(try enclave.status().biometryLockout, "failures")
        XCTAssertEqual(try enclave.status().biometricFailures, 5)
        enclave.run {
            XCTAssertEqual(canEvaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics), .biometryLockout)
        }
    }

    func testPasscodeDelayScheduleSurvivesRestartAndRefusesWithoutCounting() async throws {
        let enclave = try TestEnclave()
        let wrong = ["0001", "0002", "0003", "0004", "0005"]
        for (i, p) in wrong.enumerated() {
            XCTAssertThrowsError(try enclave.unenroll("right-index-finger", passcode: p)) { error in
                guard case .failure(let f)? = error as? EnclaveClientError else { return XCTFail("\(error)") }
                XCTAssertEqual(f.code, .passcodeIncorrect, "attempt \(i + 1)")
            }
        }
        var s = try enclave.status()
        XCTAssertEqual(s.passcodeFailures, 5)
        XCTAssertEqual(s.passcodeRetryAfter ?? 0, 60, accuracy: 5, "5 failures: 1 minute")
        try enclave.restart()
        enclave.kill()
        try enclave.start()
        s = try enclave.status()
        XCTAssertEqual(s.passcodeFailures, 5)
        XCTAssertEqual(s.passcodeRetryAfter ?? 0, 60, accuracy: 10, "the delay survives restarts")
        // During the delay even the right passcode is refused, unchecked and uncounted.
        XCTAssertThrowsError(try enclave.unenroll("right-index-finger", passcode: "1234")) { error in
            guard case .failure(let f)? = error as? EnclaveClientError else { return XCTFail("\(error)") }
            XCTAssertEqual(f.code, .passcodeRetryLater)
        }
        try enclave.queue(.passcode("0006"), .cancel)
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthentication) }
        XCTAssertEqual(code, .userCancel)
        XCTAssertEqual(try enclave.status().passcodeFailures, 5, "an attempt during a delay does not count")
        XCTAssertEqual(try enclave.status().enrolledCount, 1)
    }

    func testTheSameWrongPasscodeTwiceCountsOnce() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(
            .nomatch,
            .nomatch,
            .nomatch,
            .passcode("9999"),
            .passcode("9999"),
            .passcode("8888"),
            .cancel
        )
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthentication) }
        XCTAssertEqual(code, .userCancel)
        XCTAssertEqual(try enclave.status().passcodeFailures, 2)
    }

    /// Reaching "disabled" (10 failures) end to end would take hours of delays; the unit tests
    /// cover it with a manual clock. Here: an administrator's reset lifts a running delay.
    func testAdministratorResetLiftsARunningDelay() throws {
        let enclave = try TestEnclave(.with { $0.enrolled = [] })
        for i in 1...5 {
            XCTAssertThrowsError(try enclave.setPasscode("5678", current: "000\(i)"))
        }
        var s = try enclave.status()
        XCTAssertEqual(s.passcodeFailures, 5)
        XCTAssertNotNil(s.passcodeRetryAfter)
        XCTAssertThrowsError(try enclave.setPasscode("5678", current: "1234"), "refused during the delay")
        try enclave.resetPasscodeLockout()
        s = try enclave.status()
        XCTAssertEqual(s.passcodeFailures, 0)
        XCTAssertNil(s.passcodeRetryAfter)
        try enclave.setPasscode("5678", current: "1234")
    }

    func testRemoteLockRefusesBiometricsUntilThePasscode() async throws {
        let enclave = try TestEnclave()
        try enclave.remoteLock()
        enclave.run {
            XCTAssertEqual(canEvaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics), .biometryLockout)
        }
        XCTAssertEqual(try enclave.status().biometryLockout, "remoteLock")
        try enclave.queue(.passcode("1234"))
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthentication) }
        XCTAssertNil(code)
        enclave.run { XCTAssertNil(canEvaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics)) }
    }
}

func evaluateBlocking(_ context: LAContext, _ policy: LAPolicy) -> LAError.Code? {
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var result: LAError.Code?
    context.evaluatePolicy(policy, localizedReason: "Test") { _, error in
        result = (error as? LAError)?.code
        done.signal()
    }
    done.wait()
    return result
}
