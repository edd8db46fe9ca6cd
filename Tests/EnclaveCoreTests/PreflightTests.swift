import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

final class PreflightTests: XCTestCase {
    let clock = ManualClock()
    var wall: Date { clock.wall() }

    private func code(
        _ policy: PolicyValue,
        _ facts: DeviceFacts,
        _ ledger: AttemptLedger = AttemptLedger()
    ) -> LAErrorCode? {
        Preflight.check(policy, facts: facts, ledger: ledger, wall: wall)?.0
    }

    // MARK: deviceOwnerAuthenticationWithBiometrics, in order

    func testBiometricPolicyNoSensorComesFirst() {
        // Everything else wrong too: the missing sensor is reported.
        XCTAssertEqual(
            code(
                .deviceOwnerAuthenticationWithBiometrics,
                DeviceFacts(sensor: .none, enrolled: false, passcodeSet: false),
                .withBiometricFailures(5)
            ),
            .biometryNotAvailable
        )
    }

    func testBiometricPolicyPasscodeNotSetBeforeNotEnrolled() {
        XCTAssertEqual(
            code(
                .deviceOwnerAuthenticationWithBiometrics,
                DeviceFacts(sensor: .touchID, enrolled: false, passcodeSet: false),
                .withBiometricFailures(5)
            ),
            .passcodeNotSet
        )
    }

    func testBiometricPolicyNotEnrolledBeforeLockout() {
        XCTAssertEqual(
            code(
                .deviceOwnerAuthenticationWithBiometrics,
                DeviceFacts(sensor: .faceID, enrolled: false, passcodeSet: true),
                .withBiometricFailures(5)
            ),
            .biometryNotEnrolled
        )
    }

    func testBiometricPolicyLockoutLast() {
        XCTAssertEqual(
            code(.deviceOwnerAuthenticationWithBiometrics, Fixture.touch, .withBiometricFailures(5)),
            .biometryLockout
        )
    }

    func testBiometricPolicyLockoutForEveryRefusalReason() {
        var boot = AttemptLedger()
        _ = boot.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true)
        clock.reboot(bootID: "boot-2")
        _ = boot.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true)
        var remote = AttemptLedger()
        remote.remoteLock()
        var inactive = AttemptLedger()
        inactive.recordPasscodeSuccess(wall: wall)
        clock.advance(48 * 3600 + 1)
        for (ledger, reason) in [(boot, BiometryLockReason.boot), (remote, .remoteLock), (inactive, .inactivity)] {
            let result = Preflight.check(
                .deviceOwnerAuthenticationWithBiometrics,
                facts: Fixture.touch,
                ledger: ledger,
                wall: wall
            )
            XCTAssertEqual(result?.0, .biometryLockout, "\(reason)")
            XCTAssertEqual(result?.1, Preflight.lockoutMessage(reason))
        }
    }

    func testBiometricPolicySucceedsWhenAllIsWell() {
        XCTAssertNil(code(.deviceOwnerAuthenticationWithBiometrics, Fixture.touch, .withBiometricFailures(4)))
        XCTAssertNil(code(.deviceOwnerAuthenticationWithBiometrics, Fixture.face))
    }

    // MARK: deviceOwnerAuthentication

    func testOwnerPolicyNeedsOnlyAPasscode() {
        XCTAssertEqual(
            code(.deviceOwnerAuthentication, DeviceFacts(sensor: .touchID, enrolled: true, passcodeSet: false)),
            .passcodeNotSet
        )
        XCTAssertEqual(
            code(.deviceOwnerAuthentication, DeviceFacts(sensor: .none, enrolled: false, passcodeSet: false)),
            .passcodeNotSet
        )
        XCTAssertNil(code(.deviceOwnerAuthentication, Fixture.noSensor))
        XCTAssertNil(
            code(.deviceOwnerAuthentication, DeviceFacts(sensor: .touchID, enrolled: false, passcodeSet: true))
        )
        XCTAssertNil(
            code(.deviceOwnerAuthentication, Fixture.touch, .withBiometricFailures(5)),
            "lockout sends it to the passcode, not to an error"
        )
    }

    // MARK: Companion policies

    func testCompanionPoliciesReportCompanionNotAvailable() {
        for policy in [
            PolicyValue.deviceOwnerAuthenticationWithCompanion, .deviceOwnerAuthenticationWithBiometricsOrCompanion,
        ] {
            for facts in [
                Fixture.touch, Fixture.noSensor, DeviceFacts(sensor: .faceID, enrolled: false, passcodeSet: false),
            ] {
                XCTAssertEqual(code(policy, facts), .companionNotAvailable, "\(policy) \(facts)")
            }
        }
        XCTAssertEqual(PolicyValue(rawValue: 3), .deviceOwnerAuthenticationWithCompanion)
        XCTAssertEqual(PolicyValue(rawValue: 4), .deviceOwnerAuthenticationWithBiometricsOrCompanion)
        XCTAssertEqual(LAErrorCode.companionNotAvailable.rawValue, -11)
    }

    func testWristDetectionPolicyIsAClearError() {
        XCTAssertNotNil(
            Preflight.check(
                .deviceOwnerAuthenticationWithWristDetection,
                facts: Fixture.touch,
                ledger: AttemptLedger(),
                wall: wall
            )
        )
    }

    func testErrorRawValuesMatchApple() {
        XCTAssertEqual(LAErrorCode.authenticationFailed.rawValue, -1)
        XCTAssertEqual(LAErrorCode.userCancel.rawValue, -2)
        XCTAssertEqual(LAErrorCode.userFallback.rawValue, -3)
        XCTAssertEqual(LAErrorCode.systemCancel.rawValue, -4)
        XCTAssertEqual(LAErrorCode.passcodeNotSet.rawValue, -5)
        XCTAssertEqual(LAErrorCode.biometryNotAvailable.rawValue, -6)
        XCTAssertEqual(LAErrorCode.biometryNotEnrolled.rawValue, -7)
        XCTAssertEqual(LAErrorCode.biometryLockout.rawValue, -8)
        XCTAssertEqual(LAErrorCode.appCancel.rawValue, -9)
        XCTAssertEqual(LAErrorCode.invalidContext.rawValue, -10)
        XCTAssertEqual(LAErrorCode.notInteractive.rawValue, -1004)
    }
}

final class ContextAuthorizationTests: XCTestCase {
    let clock = ManualClock()

    func testDefaultLifetimeIsThreeHundredSeconds() {
        XCTAssertEqual(ContextAuthorization.defaultLifetime, 300)
    }

    func testSatisfiedWithinLifetimeAndExpiresAfter() {
        let auth = ContextAuthorization(at: clock.monotonic(), biometric: true)
        clock.advance(300)
        XCTAssertTrue(auth.satisfies(.deviceOwnerAuthentication, now: clock.monotonic(), lifetime: 300))
        clock.advance(0.5)
        XCTAssertFalse(auth.satisfies(.deviceOwnerAuthentication, now: clock.monotonic(), lifetime: 300))
        XCTAssertFalse(auth.satisfies(.deviceOwnerAuthenticationWithBiometrics, now: clock.monotonic(), lifetime: 300))
    }

    func testConfigurableLifetime() {
        let auth = ContextAuthorization(at: clock.monotonic(), biometric: true)
        clock.advance(20)
        XCTAssertFalse(auth.satisfies(.deviceOwnerAuthentication, now: clock.monotonic(), lifetime: 10))
        XCTAssertTrue(auth.satisfies(.deviceOwnerAuthentication, now: clock.monotonic(), lifetime: 3600))
    }

    func testBiometricAuthorizationSatisfiesBothPolicies() {
        let auth = ContextAuthorization(at: clock.monotonic(), biometric: true)
        clock.advance(1)
        XCTAssertTrue(auth.satisfies(.deviceOwnerAuthenticationWithBiometrics, now: clock.monotonic(), lifetime: 300))
        XCTAssertTrue(auth.satisfies(.deviceOwnerAuthentication, now: clock.monotonic(), lifetime: 300))
    }

    func testPasscodeAuthorizationDoesNotSatisfyBiometricPolicy() {
        let auth = ContextAuthorization(at: clock.monotonic(), biometric: false)
        clock.advance(1)
        XCTAssertFalse(auth.satisfies(.deviceOwnerAuthenticationWithBiometrics, now: clock.monotonic(), lifetime: 300))
        XCTAssertTrue(auth.satisfies(.deviceOwnerAuthentication, now: clock.monotonic(), lifetime: 300))
    }

    func testCompanionPoliciesNeverSatisfied() {
        let auth = ContextAuthorization(at: clock.monotonic(), biometric: true)
        XCTAssertFalse(auth.satisfies(.deviceOwnerAuthenticationWithCompanion, now: clock.monotonic(), lifetime: 300))
        XCTAssertFalse(
            auth.satisfies(.deviceOwnerAuthenticationWithBiometricsOrCompanion, now: clock.monotonic(), lifetime: 300)
        )
    }

    func testDifferentBootNeverSatisfies() {
        let auth = ContextAuthorization(at: clock.monotonic(), biometric: true)
        clock.reboot(bootID: "boot-2", after: 1)
        // Monotonic seconds restarted near zero: must not look "fresh".
        XCTAssertFalse(auth.satisfies(.deviceOwnerAuthentication, now: clock.monotonic(), lifetime: 300))
        XCTAssertFalse(
            auth.satisfies(
                .deviceOwnerAuthentication,
                now: MonotonicStamp(bootID: "boot-2", seconds: auth.at.seconds),
                lifetime: 300
            )
        )
    }

    func testStampFromTheFutureNeverSatisfies() {
        let auth = ContextAuthorization(at: MonotonicStamp(bootID: "boot-1", seconds: 2000), biometric: true)
        XCTAssertFalse(
            auth.satisfies(
                .deviceOwnerAuthentication,
                now: MonotonicStamp(bootID: "boot-1", seconds: 1999),
                lifetime: 300
            )
        )
    }
}
