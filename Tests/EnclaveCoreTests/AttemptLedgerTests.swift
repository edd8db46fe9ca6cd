import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

final class AttemptLedgerTests: XCTestCase {
    let clock = ManualClock()

    // MARK: Biometric failures and lockout

    func testFreshLedgerRefusesNothing() {
        let l = AttemptLedger()
        XCTAssertEqual(l.biometricFailures, 0)
        XCTAssertEqual(l.passcodeFailures, 0)
        XCTAssertNil(l.biometryLock)
        XCTAssertNil(l.biometryRefusal(now: clock.wall()))
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .open)
    }

    func testFourBiometricFailuresDoNotLock() {
        var l = AttemptLedger()
        for i in 1...4 {
            XCTAssertFalse(l.recordBiometricFailure(), "failure \(i) must not lock")
            XCTAssertEqual(l.biometricFailures, i)
        }
        XCTAssertNil(l.biometryRefusal(now: clock.wall()))
    }

    func testFifthConsecutiveBiometricFailureLocks() {
        var l = AttemptLedger.withBiometricFailures(4)
        XCTAssertTrue(l.recordBiometricFailure())
        XCTAssertEqual(l.biometricFailures, 5)
        XCTAssertEqual(l.biometryLock, .failures)
        XCTAssertEqual(l.biometryRefusal(now: clock.wall()), .failures)
        XCTAssertEqual(AttemptLedger.biometricLockoutThreshold, 5)
    }

    func testFurtherFailuresAfterLockoutDoNotReportLockingAgain() {
        var l = AttemptLedger.withBiometricFailures(5)
        XCTAssertFalse(l.recordBiometricFailure())
        XCTAssertEqual(l.biometricFailures, 6)
        XCTAssertEqual(l.biometryLock, .failures)
    }

    func testMatchResetsConsecutiveFailureCounter() {
        var l = AttemptLedger.withBiometricFailures(4)
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/app")
        XCTAssertEqual(l.biometricFailures, 0)
        // Four more failures are needed again... and the fifth locks.
        for _ in 0..<4 { XCTAssertFalse(l.recordBiometricFailure()) }
        XCTAssertNil(l.biometryLock)
        XCTAssertTrue(l.recordBiometricFailure())
        XCTAssertEqual(l.biometryLock, .failures)
    }

    func testOnlyCorrectPasscodeClearsBiometricLockout() {
        var l = AttemptLedger.withBiometricFailures(5)
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/app")
        XCTAssertEqual(l.biometryRefusal(now: clock.wall()), .failures, "a match does not lift the lockout")
        l.recordPasscodeFailure(attempt: Fixture.wrong(1), now: clock.monotonic())
        XCTAssertEqual(l.biometryRefusal(now: clock.wall()), .failures, "a wrong passcode does not lift it")
        l.administratorReset()
        XCTAssertEqual(l.biometryRefusal(now: clock.wall()), .failures, "the passcode-disabled reset does not lift it")
        clock.advance(7 * 24 * 3600)
        l.recordPasscodeSuccess(wall: clock.wall())
        XCTAssertNil(l.biometryLock)
        XCTAssertNil(l.biometryRefusal(now: clock.wall()))
        XCTAssertEqual(l.biometricFailures, 0)
    }

    // MARK: Passcode delays

    func testPasscodeFailuresOneToFourHaveNoDelay() {
        var l = AttemptLedger()
        for i in 0..<4 {
            XCTAssertTrue(l.recordPasscodeFailure(attempt: Fixture.wrong(i), now: clock.monotonic()))
            XCTAssertEqual(l.passcodeFailures, i + 1)
            XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .open)
        }
        XCTAssertNil(l.delayStartedAt)
    }

    func testFifthPasscodeFailureDelaysOneMinute() {
        let l = AttemptLedger.withPasscodeFailures(5, clock: clock)
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .wait(seconds: 60))
        clock.advance(59)
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .wait(seconds: 1))
        clock.advance(1)
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .open)
    }

    func testDelayGrowsWithEachFailure() {
        var l = AttemptLedger()
        let expected: [PasscodeGate] = [
            .open, .open, .open, .open, .wait(seconds: 60), .wait(seconds: 300),
            .wait(seconds: 900), .wait(seconds: 900), .wait(seconds: 3600), .disabled, .disabled,
        ]
        for (i, gate) in expected.enumerated() {
            // Attempts are only checked when the gate is open: wait out any running delay first.
            if case .wait(let s) = l.passcodeGate(now: clock.monotonic()) { clock.advance(s) }
            XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), i < 10 ? .open : .disabled)
            l.recordPasscodeFailure(attempt: Fixture.wrong(i), now: clock.monotonic())
            XCTAssertEqual(l.passcodeFailures, i + 1)
            XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), gate, "after \(i + 1) failures")
        }
    }

    func testTenthFailureDisablesUntilAdministratorReset() {
        var l = AttemptLedger.withPasscodeFailures(10, clock: clock)
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .disabled)
        clock.advance(365 * 24 * 3600)
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .disabled, "time alone never re-enables the passcode")
        l.administratorReset()
        XCTAssertEqual(l.passcodeFailures, 0)
        XCTAssertNil(l.lastWrongPasscode)
        XCTAssertNil(l.delayStartedAt)
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .open)
    }

    func testSameWrongPasscodeTwiceInARowCountsOnce() {
        var l = AttemptLedger()
        XCTAssertTrue(l.recordPasscodeFailure(attempt: Fixture.wrong(1), now: clock.monotonic()))
        XCTAssertFalse(l.recordPasscodeFailure(attempt: Fixture.wrong(1), now: clock.monotonic()))
        XCTAssertEqual(l.passcodeFailures, 1)
        XCTAssertTrue(l.recordPasscodeFailure(attempt: Fixture.wrong(2), now: clock.monotonic()))
        XCTAssertEqual(l.passcodeFailures, 2)
        // Only *in a row*: A, B, A counts three times.
        XCTAssertTrue(l.recordPasscodeFailure(attempt: Fixture.wrong(1), now: clock.monotonic()))
        XCTAssertEqual(l.passcodeFailures, 3)
    }

    func testRepeatedWrongPasscodeDoesNotRestartDelay() {
        var l = AttemptLedger.withPasscodeFailures(5, clock: clock)
        clock.advance(60)
        XCTAssertFalse(l.recordPasscodeFailure(attempt: Fixture.wrong(4), now: clock.monotonic()))
        XCTAssertEqual(l.passcodeFailures, 5)
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .open)
    }

    func testCorrectPasscodeClearsPasscodeCounters() {
        var l = AttemptLedger.withPasscodeFailures(7, clock: clock)
        clock.advance(900)
        l.recordPasscodeSuccess(wall: clock.wall())
        XCTAssertEqual(l.passcodeFailures, 0)
        XCTAssertNil(l.lastWrongPasscode)
        XCTAssertNil(l.delayStartedAt)
        XCTAssertEqual(l.lastOwnerAuthentication, clock.wall())
        // The counter really restarted: four more failures give no delay.
        for i in 0..<4 { l.recordPasscodeFailure(attempt: Fixture.wrong(100 + i), now: clock.monotonic()) }
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .open)
    }

    func testDelaySurvivesDaemonRestartThroughJSON() throws {
        let l = AttemptLedger.withPasscodeFailures(6, clock: clock)
        clock.advance(100)
        let data = try JSONEncoder().encode(l)
        var restored = try JSONDecoder().decode(AttemptLedger.self, from: data)
        // Everything durable comes back; the last wrong passcode's digest never went to disk.
        XCTAssertEqual(restored.biometricFailures, l.biometricFailures)
        XCTAssertEqual(restored.biometryLock, l.biometryLock)
        XCTAssertEqual(restored.delayStartedAt, l.delayStartedAt)
        XCTAssertEqual(restored.delayStartedWall, l.delayStartedWall)
        XCTAssertEqual(restored.lastOwnerAuthentication, l.lastOwnerAuthentication)
        XCTAssertEqual(restored.lastBiometricMatch, l.lastBiometricMatch)
        XCTAssertEqual(restored.lastSeenBootID, l.lastSeenBootID)
        XCTAssertNotNil(l.lastWrongPasscode)
        XCTAssertNil(restored.lastWrongPasscode)
        XCTAssertEqual(restored.passcodeFailures, 6)
        // Same boot: the daemon restarted, the machine did not.
        _ = restored.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false)
        XCTAssertEqual(restored.passcodeGate(now: clock.monotonic()), .wait(seconds: 200))
        // And counting continues from where it was.
        clock.advance(200)
        restored.recordPasscodeFailure(attempt: Fixture.wrong(99), now: clock.monotonic())
        XCTAssertEqual(restored.passcodeFailures, 7)
        XCTAssertEqual(restored.passcodeGate(now: clock.monotonic()), .wait(seconds: 900))
    }

    func testBiometricLockoutSurvivesRestartThroughJSON() throws {
        let l = AttemptLedger.withBiometricFailures(5)
        let restored = try JSONDecoder().decode(AttemptLedger.self, from: JSONEncoder().encode(l))
        XCTAssertEqual(restored.biometryLock, .failures)
        XCTAssertEqual(restored.biometricFailures, 5)
    }

    func testRebootRestartsCurrentDelayForItsFullPeriod() throws {
        var l = AttemptLedger()
        XCTAssertTrue(l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false))
        for i in 0..<6 { l.recordPasscodeFailure(attempt: Fixture.wrong(i), now: clock.monotonic()) }
        clock.advance(250)  // 50 s of the 300 s delay left
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .wait(seconds: 50))
        var restored = try JSONDecoder().decode(AttemptLedger.self, from: JSONEncoder().encode(l))
        clock.reboot(bootID: "boot-2")
        XCTAssertTrue(restored.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false))
        XCTAssertEqual(restored.lastSeenBootID, "boot-2")
        XCTAssertEqual(restored.passcodeGate(now: clock.monotonic()), .wait(seconds: 300))
        clock.advance(299)
        XCTAssertEqual(restored.passcodeGate(now: clock.monotonic()), .wait(seconds: 1))
        clock.advance(1)
        XCTAssertEqual(restored.passcodeGate(now: clock.monotonic()), .open)
        XCTAssertEqual(restored.passcodeFailures, 6)
    }

    func testDisabledStateSurvivesReboot() {
        var l = AttemptLedger()
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false)
        for i in 0..<10 { l.recordPasscodeFailure(attempt: Fixture.wrong(i), now: clock.monotonic()) }
        clock.reboot(bootID: "boot-2")
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false)
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .disabled)
    }

    // MARK: Boot, inactivity, remote lock

    func testFirstLoadEverDoesNotLockBiometry() {
        var l = AttemptLedger()
        XCTAssertTrue(l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true))
        XCTAssertNil(l.biometryLock)
        XCTAssertEqual(l.lastSeenBootID, "boot-1")
    }

    func testLoadAfterRebootLocksBiometryInSystemMode() {
        var l = AttemptLedger()
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true)
        clock.reboot(bootID: "boot-2")
        XCTAssertTrue(l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true))
        XCTAssertEqual(l.biometryLock, .boot)
        XCTAssertEqual(l.biometryRefusal(now: clock.wall()), .boot)
        l.recordPasscodeSuccess(wall: clock.wall())
        XCTAssertNil(l.biometryRefusal(now: clock.wall()))
    }

    func testLoadAfterRebootDoesNotLockInUserMode() {
        var l = AttemptLedger()
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false)
        clock.reboot(bootID: "boot-2")
        XCTAssertTrue(l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false))
        XCTAssertNil(l.biometryLock)
    }

    func testReloadWithinSameBootChangesNothing() {
        var l = AttemptLedger()
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true)
        let before = l
        clock.advance(10)
        XCTAssertFalse(l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true))
        XCTAssertEqual(l, before)
        XCTAssertNil(l.biometryLock)
    }

    func testBootLockDoesNotReplaceFailureLockout() {
        var l = AttemptLedger.withBiometricFailures(5)
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true)
        clock.reboot(bootID: "boot-2")
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true)
        XCTAssertEqual(l.biometryLock, .failures)
    }

    func testFortyEightHoursWithoutOwnerAuthenticationRefusesBiometry() {
        var l = AttemptLedger()
        l.recordPasscodeSuccess(wall: clock.wall())
        clock.advance(48 * 3600)
        XCTAssertNil(l.biometryRefusal(now: clock.wall()), "exactly 48 h is still allowed")
        clock.advance(1)
        XCTAssertEqual(l.biometryRefusal(now: clock.wall()), .inactivity)
        l.recordPasscodeSuccess(wall: clock.wall())
        XCTAssertNil(l.biometryRefusal(now: clock.wall()))
    }

    func testBiometricMatchAlsoResetsInactivityTimer() {
        var l = AttemptLedger()
        l.recordPasscodeSuccess(wall: clock.wall())
        clock.advance(47 * 3600)
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/app")
        clock.advance(47 * 3600)
        XCTAssertNil(l.biometryRefusal(now: clock.wall()))
        clock.advance(3600 + 1)
        XCTAssertEqual(l.biometryRefusal(now: clock.wall()), .inactivity)
    }

    func testInactivitySpansReboots() {
        var l = AttemptLedger()
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false)
        l.recordPasscodeSuccess(wall: clock.wall())
        clock.reboot(bootID: "boot-2", after: 49 * 3600)
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false)
        XCTAssertEqual(l.biometryRefusal(now: clock.wall()), .inactivity)
    }

    func testRemoteLockRefusesBiometryUntilPasscode() {
        var l = AttemptLedger()
        l.remoteLock()
        XCTAssertEqual(l.biometryRefusal(now: clock.wall()), .remoteLock)
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/app")
        XCTAssertEqual(l.biometryRefusal(now: clock.wall()), .remoteLock)
        l.recordPasscodeSuccess(wall: clock.wall())
        XCTAssertNil(l.biometryRefusal(now: clock.wall()))
    }

    // MARK: Reuse

    func testReuseWithinWindow() {
        var l = AttemptLedger()
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/app")
        clock.advance(10)
        XCTAssertTrue(l.allowsReuse(of: 10, now: clock.monotonic(), app: "/usr/bin/app"))
        XCTAssertFalse(l.allowsReuse(of: 9.5, now: clock.monotonic(), app: "/usr/bin/app"))
    }

    /// Only the app's own match, and only the user's last one: no app rides on another's touch.
    func testReuseCountsOnlyTheSameAppsMatch() {
        var l = AttemptLedger()
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/victim")
        clock.advance(1)
        let table: [(app: String, reused: Bool)] = [("/usr/bin/victim", true), ("/usr/bin/other", false), ("", false)]
        for row in table {
            XCTAssertEqual(l.allowsReuse(of: 300, now: clock.monotonic(), app: row.app), row.reused, row.app)
        }
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/other")
        XCTAssertTrue(l.allowsReuse(of: 300, now: clock.monotonic(), app: "/usr/bin/other"))
        XCTAssertFalse(
            l.allowsReuse(of: 300, now: clock.monotonic(), app: "/usr/bin/victim"),
            "a later match of another app replaces it"
        )
        // Persisted with the ledger: a restarted daemon keeps whose match it was.
        let reloaded = try! JSONDecoder().decode(AttemptLedger.self, from: JSONEncoder().encode(l))
        XCTAssertTrue(reloaded.allowsReuse(of: 300, now: clock.monotonic(), app: "/usr/bin/other"))
        XCTAssertFalse(reloaded.allowsReuse(of: 300, now: clock.monotonic(), app: "/usr/bin/victim"))
    }

    func testZeroReuseDurationNeverReuses() {
        var l = AttemptLedger()
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/app")
        XCTAssertFalse(l.allowsReuse(of: 0, now: clock.monotonic(), app: "/usr/bin/app"))
        XCTAssertFalse(l.allowsReuse(of: -5, now: clock.monotonic(), app: "/usr/bin/app"))
    }

    func testReuseWithoutAnyMatchIsRefused() {
        XCTAssertFalse(AttemptLedger().allowsReuse(of: 300, now: clock.monotonic(), app: "/usr/bin/app"))
    }

    func testReuseDurationClampsToThreeHundredSeconds() {
        var l = AttemptLedger()
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/app")
        clock.advance(300)
        XCTAssertTrue(l.allowsReuse(of: 10_000, now: clock.monotonic(), app: "/usr/bin/app"))
        clock.advance(1)
        XCTAssertFalse(l.allowsReuse(of: 10_000, now: clock.monotonic(), app: "/usr/bin/app"))
        XCTAssertEqual(AttemptLedger.maximumReuseDuration, 300)
    }

    func testReuseNotAcrossBoots() {
        var l = AttemptLedger()
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/app")
        clock.reboot(bootID: "boot-2", after: 1)
        XCTAssertFalse(l.allowsReuse(of: 300, now: clock.monotonic(), app: "/usr/bin/app"))
    }

    func testPasscodeSuccessIsNotABiometricMatchForReuse() {
        var l = AttemptLedger()
        l.recordPasscodeSuccess(wall: clock.wall())
        XCTAssertFalse(l.allowsReuse(of: 300, now: clock.monotonic(), app: "/usr/bin/app"))
    }

    // MARK: Passcode set / removed

    func testPasscodeChangeClearsEverything() {
        var l = AttemptLedger.withPasscodeFailures(7, clock: clock)
        for _ in 0..<5 { l.recordBiometricFailure() }
        l.passcodeChanged(wall: clock.wall())
        XCTAssertEqual(l.passcodeFailures, 0)
        XCTAssertEqual(l.biometricFailures, 0)
        XCTAssertNil(l.biometryLock)
        XCTAssertEqual(l.passcodeGate(now: clock.monotonic()), .open)
        XCTAssertEqual(l.lastOwnerAuthentication, clock.wall())
    }

    func testPasscodeRemovedResetsButRemembersBoot() {
        var l = AttemptLedger()
        _ = l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true)
        for i in 0..<3 { l.recordPasscodeFailure(attempt: Fixture.wrong(i), now: clock.monotonic()) }
        l.recordBiometricMatch(now: clock.monotonic(), wall: clock.wall(), app: "/usr/bin/app")
        l.passcodeRemoved()
        XCTAssertEqual(l.passcodeFailures, 0)
        XCTAssertNil(l.lastBiometricMatch)
        XCTAssertNil(l.lastOwnerAuthentication)
        XCTAssertEqual(l.lastSeenBootID, "boot-1")
        XCTAssertFalse(l.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: true))
    }

    // MARK: Constant-time comparison

    func testConstantTimeEqual() {
        XCTAssertTrue(ConstantTime.equal([1, 2, 3] as [UInt8], [1, 2, 3] as [UInt8]))
        XCTAssertFalse(ConstantTime.equal([1, 2, 3] as [UInt8], [1, 2, 4] as [UInt8]))
        XCTAssertFalse(ConstantTime.equal([1, 2, 3] as [UInt8], [1, 2] as [UInt8]))
        XCTAssertTrue(ConstantTime.equal(Data(), Data()))
    }

    func testAfterARebootARunningDelayRestartsButAnExpiredOneStaysOver() {
        let clock = ManualClock()
        var ledger = AttemptLedger()
        _ = ledger.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: false, wall: clock.wall())
        for i in 1...5 {
            ledger.recordPasscodeFailure(attempt: Data([UInt8(i)]), now: clock.monotonic(), wall: clock.wall())
        }
        XCTAssertEqual(ledger.passcodeGate(now: clock.monotonic()), .wait(seconds: 60))

        var running = ledger
        let runningClock = ManualClock()
        runningClock.reboot(bootID: "boot-2", after: 30)
        _ = running.noteLoaded(
            now: runningClock.monotonic(),
            lockBiometryOnBoot: false,
            wall: clock.wall().addingTimeInterval(30)
        )
        XCTAssertEqual(
            running.passcodeGate(now: runningClock.monotonic()),
            .wait(seconds: 60),
            "a running delay restarts in full"
        )

        var expired = ledger
        let laterClock = ManualClock()
        laterClock.reboot(bootID: "boot-3", after: 7200)
        _ = expired.noteLoaded(
            now: laterClock.monotonic(),
            lockBiometryOnBoot: false,
            wall: clock.wall().addingTimeInterval(7200)
        )
        XCTAssertEqual(
            expired.passcodeGate(now: laterClock.monotonic()),
            .open,
            "an expired delay is not imposed again"
        )
        XCTAssertEqual(expired.passcodeFailures, 5, "the counter itself stays")
    }

    func testARefusalThatIsNotOurVerifiersAlwaysCounts() {
        var l = AttemptLedger()
        // PAM: no digest of what was typed; the stack may have tried a fingerprint as well.
        XCTAssertTrue(l.recordPasscodeFailure(attempt: nil, now: clock.monotonic()))
        XCTAssertTrue(l.recordPasscodeFailure(attempt: nil, now: clock.monotonic()))
        XCTAssertEqual(l.passcodeFailures, 2)
        XCTAssertNil(l.lastWrongPasscode)
        // Our own verifier's repeat still counts once, and a refusal in between breaks the run.
        XCTAssertTrue(l.recordPasscodeFailure(attempt: Fixture.wrong(1), now: clock.monotonic()))
        XCTAssertFalse(l.recordPasscodeFailure(attempt: Fixture.wrong(1), now: clock.monotonic()))
        XCTAssertTrue(l.recordPasscodeFailure(attempt: nil, now: clock.monotonic()))
        XCTAssertTrue(l.recordPasscodeFailure(attempt: Fixture.wrong(1), now: clock.monotonic()))
        XCTAssertEqual(l.passcodeFailures, 5)
    }

    func testTheLastWrongPasscodeNeverReachesTheDisk() throws {
        var l = AttemptLedger()
        l.recordPasscodeFailure(attempt: Fixture.wrong(7), now: clock.monotonic(), wall: clock.wall())
        XCTAssertNotNil(l.lastWrongPasscode)
        let stored = try JSONEncoder().encode(l)
        XCTAssertFalse(
            String(decoding: stored, as: UTF8.self).contains("lastWrongPasscode"),
            String(decoding: stored, as: UTF8.self)
        )
        XCTAssertNil(stored.range(of: Fixture.wrong(7)), "nor its bytes")
        let loaded = try JSONDecoder().decode(AttemptLedger.self, from: stored)
        XCTAssertNil(loaded.lastWrongPasscode)
        XCTAssertEqual(loaded.passcodeFailures, 1, "the count itself is durable")
        // State written before this change still loads; its stored digest is dropped.
        let old = #"{"biometricFailures":0,"passcodeFailures":3,"lastWrongPasscode":"qgcA"}"#
        let upgraded = try JSONDecoder().decode(AttemptLedger.self, from: Data(old.utf8))
        XCTAssertEqual(upgraded.passcodeFailures, 3)
        XCTAssertNil(upgraded.lastWrongPasscode)
    }

    /// Counted first, then taken back: exactly the count goes — the delay it started included —
    /// and what others did meanwhile stays.
    func testACountMadeFirstIsTakenBackAlone() {
        let rows: [(String, Int, (inout AttemptLedger) -> Void, Int, Bool)] = [
            ("nothing meanwhile", 2, { _ in }, 2, false),
            ("the fifth count started the delay: taken back with it", 4, { _ in }, 4, false),
            ("an administrator reset meanwhile", 3, { $0.administratorReset() }, 0, false),
            ("a remote lock meanwhile", 1, { $0.remoteLock() }, 1, true),
        ]
        for (name, failures, meanwhile, expected, locked) in rows {
            var ledger = AttemptLedger()
            let now = MonotonicStamp(bootID: "b", seconds: 100)
            for n in 0..<failures {
                ledger.recordPasscodeFailure(attempt: Data([UInt8(n)]), now: now, wall: Date())
            }
            let before = ledger
            let later = MonotonicStamp(bootID: "b", seconds: 200)
            let pending = ledger.countPasscodeEntryFirst(now: later, wall: Date())
            XCTAssertEqual(ledger.passcodeFailures, failures + 1, name)
            meanwhile(&ledger)
            ledger.takeBack(pending)
            XCTAssertEqual(ledger.passcodeFailures, expected, name)
            XCTAssertEqual(ledger.biometryLock != nil, locked, name)
            if expected == failures {
                XCTAssertEqual(ledger.passcodeGate(now: later), before.passcodeGate(now: later), name)
            }
            XCTAssertTrue(
                ledger.repeatsLastWrongEntry(failures > 0 ? Data([UInt8(failures - 1)]) : nil)
                    == (failures > 0 && expected > 0),
                name
            )
        }
    }
}
