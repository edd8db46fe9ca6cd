import Foundation

/// Why biometrics are refused until the device passcode is entered.
public enum BiometryLockReason: String, Codable, Sendable, Equatable {
    /// Five consecutive failed matches.
    case failures
    /// The daemon's state was first loaded after a machine boot (system mode).
    case boot
    /// No successful device-owner authentication for 48 hours.
    case inactivity
    /// An administrator's remote-lock command.
    case remoteLock
}

/// Whether a passcode attempt may be checked now.
public enum PasscodeGate: Equatable, Sendable {
    case open
    /// Refused without being checked and without counting.
    case wait(seconds: Double)
    case disabled
}

/// The per-user counters and locks that guard against guessing — the one place where the
/// attempt and lockout rules of behavior.md §3 live. Persisted after every change, before the
/// answer leaves the daemon.
public struct AttemptLedger: Codable, Sendable, Equatable {
    public static let biometricLockoutThreshold = 5
    public static let inactivityLimit: Double = 48 * 3600
    public static let maximumReuseDuration: Double = 300

    public private(set) var biometricFailures = 0
    public private(set) var biometryLock: BiometryLockReason?
    public private(set) var passcodeFailures = 0
    /// Verifier output of the last wrong passcode, so the same wrong passcode twice counts once.
    /// Kept in memory only (not in `CodingKeys`): on disk it would hand a thief of the state the
    /// hash of a near-miss — often a one-character typo of the real passcode. After a restart the
    /// same wrong entry counts again.
    public private(set) var lastWrongPasscode: Data?

    /// Whether `attempt` repeats the last wrong entry: answered wrong again without a count.
    public func repeatsLastWrongEntry(_ attempt: Data?) -> Bool {
        guard let attempt, let last = lastWrongPasscode else { return false }
        return ConstantTime.equal(last, attempt)
    }
    /// When the current delay started; its length follows from `passcodeFailures`.
    public private(set) var delayStartedAt: MonotonicStamp?
    /// The same moment on the wall clock: across a reboot it tells whether the delay was over.
    public private(set) var delayStartedWall: Date?
    public private(set) var lastOwnerAuthentication: Date?
    public private(set) var lastBiometricMatch: MonotonicStamp?
    /// The app whose evaluation that match was: only it may reuse it.
    public private(set) var lastBiometricMatchApp: String?
    public private(set) var lastSeenBootID: String?

    public init() {}

    private enum CodingKeys: String, CodingKey {
        case biometricFailures, biometryLock, passcodeFailures, delayStartedAt, delayStartedWall
        case lastOwnerAuthentication, lastBiometricMatch, lastBiometricMatchApp, lastSeenBootID
    }

    // MARK: Queries

    /// Why biometrics are refused now, or nil when they may be tried.
    public func biometryRefusal(now wall: Date) -> BiometryLockReason? {
        if let biometryLock { return biometryLock }
        if let last = lastOwnerAuthentication, wall.timeIntervalSince(last) > Self.inactivityLimit {
            return .inactivity
        }
        return nil
    }

    public func passcodeGate(now: MonotonicStamp) -> PasscodeGate {
        switch PasscodeDelaySchedule.step(afterConsecutiveFailures: passcodeFailures) {
        case .none: return .open
        case .disabled: return .disabled
        case .delay(let seconds):
            guard let start = delayStartedAt, start.bootID == now.bootID else { return .open }
            let remaining = start.seconds + seconds - now.seconds
            return remaining > 0 ? .wait(seconds: remaining) : .open
        }
    }

    /// Whether a biometric match within `duration` seconds (clamped to 0…300) lets an evaluation of
    /// `app` succeed without a prompt. Only a match of `app`'s own evaluation counts, and only the
    /// user's last match: another app's would let any app piggyback on every touch the person gives
    /// (our rule; Apple counts only the device unlock, which no app can ask for).
    public func allowsReuse(of duration: Double, now: MonotonicStamp, app: String) -> Bool {
        let window = min(max(duration, 0), Self.maximumReuseDuration)
        guard window > 0, let match = lastBiometricMatch, match.bootID == now.bootID, lastBiometricMatchApp == app
        else { return false }
        let age = now.seconds - match.seconds
        return age >= 0 && age <= window
    }

    // MARK: Changes (each returns nothing the caller may skip: persist after every one)

    /// Called when the daemon loads this ledger. A new boot restarts a running passcode delay for
    /// its full period (the monotonic clock restarted) and, in system mode, refuses biometrics
    /// until the passcode is entered.
    public mutating func noteLoaded(now: MonotonicStamp, lockBiometryOnBoot: Bool, wall: Date? = nil) -> Bool {
        guard lastSeenBootID != now.bootID else { return false }
        let wasSeen = lastSeenBootID != nil
        lastSeenBootID = now.bootID
        if let start = delayStartedAt, start.bootID != now.bootID {
            // A delay still running restarts for its full period (the monotonic clock restarted);
            // one the wall clock shows as over stays over.
            if case .delay(let seconds) = PasscodeDelaySchedule.step(afterConsecutiveFailures: passcodeFailures),
                let began = delayStartedWall, let wall, wall.timeIntervalSince(began) >= seconds
            {
                delayStartedAt = nil
            } else {
                delayStartedAt = now
                delayStartedWall = wall ?? delayStartedWall
            }
        }
        if wasSeen, lockBiometryOnBoot, biometryLock == nil { biometryLock = .boot }
        return true
    }

    /// A failed match. Returns true when this failure locked biometry.
    @discardableResult
    public mutating func recordBiometricFailure() -> Bool {
        biometricFailures += 1
        if biometricFailures >= Self.biometricLockoutThreshold && biometryLock == nil {
            biometryLock = .failures
            return true
        }
        return false
    }

    public mutating func recordBiometricMatch(now: MonotonicStamp, wall: Date, app: String) {
        biometricFailures = 0
        lastBiometricMatch = now
        lastBiometricMatchApp = app
        lastOwnerAuthentication = wall
    }

    /// A wrong passcode. `attempt` is the verifier output for what was typed; nil when the check was
    /// not ours (PAM: a stack may also try a fingerprint, so no refusal is a repeat). Returns false
    /// when it repeated the previous wrong passcode and so did not count.
    @discardableResult
    public mutating func recordPasscodeFailure(attempt: Data?, now: MonotonicStamp, wall: Date? = nil) -> Bool {
        if repeatsLastWrongEntry(attempt) { return false }
        lastWrongPasscode = attempt
        passcodeFailures += 1
        if case .delay = PasscodeDelaySchedule.step(afterConsecutiveFailures: passcodeFailures) {
            delayStartedAt = now
            delayStartedWall = wall
        }
        return true
    }

    /// A passcode entry counted before it is checked (on the TPM root: `RollbackCounter`): what the
    /// count changed, so the check's answer takes back exactly it and nothing another request
    /// changed meanwhile.
    public struct PendingPasscodeCount: Sendable, Equatable {
        let at: MonotonicStamp
        let delayStartedAt: MonotonicStamp?
        let delayStartedWall: Date?
    }

    /// Counts an entry as a failure before it is checked: one more failure, and the delay it
    /// starts. The last wrong entry is kept (a repeat is told apart before counting).
    public mutating func countPasscodeEntryFirst(now: MonotonicStamp, wall: Date?) -> PendingPasscodeCount {
        let pending = PendingPasscodeCount(at: now, delayStartedAt: delayStartedAt, delayStartedWall: delayStartedWall)
        passcodeFailures += 1
        if case .delay = PasscodeDelaySchedule.step(afterConsecutiveFailures: passcodeFailures) {
            delayStartedAt = now
            delayStartedWall = wall
        }
        return pending
    }

    /// Takes back a count made by `countPasscodeEntryFirst` once the entry was checked (its result
    /// is then recorded as any entry's): one failure fewer, and the delay as it was if the count
    /// started it. What others did meanwhile (a reset, a lock, biometric failures) stays.
    public mutating func takeBack(_ pending: PendingPasscodeCount) {
        if passcodeFailures > 0 { passcodeFailures -= 1 }
        if delayStartedAt == pending.at {
            delayStartedAt = pending.delayStartedAt
            delayStartedWall = pending.delayStartedWall
        }
    }

    /// The right passcode: clears every counter and every biometric lock.
    public mutating func recordPasscodeSuccess(wall: Date) {
        passcodeFailures = 0
        lastWrongPasscode = nil
        delayStartedAt = nil
        delayStartedWall = nil
        biometricFailures = 0
        biometryLock = nil
        lastOwnerAuthentication = wall
    }

    /// A new passcode was set: the owner proved themselves (or had no passcode before).
    public mutating func passcodeChanged(wall: Date) {
        recordPasscodeSuccess(wall: wall)
    }

    /// The passcode was removed: with it go biometrics (enrolment is removed too).
    public mutating func passcodeRemoved() {
        self = AttemptLedger(lastSeenBootID: lastSeenBootID)
    }

    public mutating func remoteLock() { biometryLock = .remoteLock }

    /// An administrator lifts the passcode-disabled state.
    public mutating func administratorReset() {
        passcodeFailures = 0
        lastWrongPasscode = nil
        delayStartedAt = nil
        delayStartedWall = nil
    }

    private init(lastSeenBootID: String?) { self.lastSeenBootID = lastSeenBootID }
}

public enum ConstantTime {
    /// Compares without an early exit, so timing does not reveal where two secrets differ.
    public static func equal<A: Collection, B: Collection>(_ a: A, _ b: B) -> Bool
    where A.Element == UInt8, B.Element == UInt8 {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for (x, y) in zip(a, b) { diff |= x ^ y }
        return diff == 0
    }
}
