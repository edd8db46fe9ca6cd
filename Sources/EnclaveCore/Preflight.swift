import EnclaveProtocol
import Foundation

/// What the daemon knows about the user's device when a request arrives.
public struct DeviceFacts: Sendable, Equatable {
    /// The biometric sensor's kind; `.none` when there is no sensor.
    public var sensor: BiometryKind
    public var enrolled: Bool
    public var passcodeSet: Bool
    /// Why passcode checks and biometrics are refused for every user (a TPM-root state older than
    /// its rollback counter: `RollbackCounter`); nil when they are not.
    public var stateRefusal: String?
    public init(sensor: BiometryKind, enrolled: Bool, passcodeSet: Bool, stateRefusal: String? = nil) {
        self.sensor = sensor
        self.enrolled = enrolled
        self.passcodeSet = passcodeSet
        self.stateRefusal = stateRefusal
    }
}

/// `canEvaluatePolicy`'s checks, in behavior.md's order.
public enum Preflight {
    public static func check(
        _ policy: PolicyValue,
        facts: DeviceFacts,
        ledger: AttemptLedger,
        wall: Date
    ) -> (LAErrorCode, String)? {
        switch policy {
        case .deviceOwnerAuthenticationWithBiometrics:
            if facts.sensor == .none { return (.biometryNotAvailable, "Biometry is not available on this device.") }
            if !facts.passcodeSet { return (.passcodeNotSet, "Passcode not set.") }
            if !facts.enrolled { return (.biometryNotEnrolled, "No identities are enrolled.") }
            if let refusal = facts.stateRefusal { return (.biometryLockout, refusal) }
            if let reason = ledger.biometryRefusal(now: wall) { return (.biometryLockout, lockoutMessage(reason)) }
            return nil
        case .deviceOwnerAuthentication:
            if !facts.passcodeSet { return (.passcodeNotSet, "Passcode not set.") }
            // Our choice: Apple has no code for a device whose counters cannot be trusted; the
            // lockout is the nearest, and its message says why.
            if let refusal = facts.stateRefusal { return (.biometryLockout, refusal) }
            return nil
        case .deviceOwnerAuthenticationWithCompanion, .deviceOwnerAuthenticationWithBiometricsOrCompanion:
            return (.companionNotAvailable, "No companion device is available.")
        case .deviceOwnerAuthenticationWithWristDetection:
            return (.companionNotAvailable, "Wrist detection needs an Apple Watch; none is available on this system.")
        }
    }

    public static func lockoutMessage(_ reason: BiometryLockReason) -> String {
        switch reason {
        case .failures: return "Biometry is locked out after too many failed attempts; enter the passcode."
        case .boot: return "Biometry needs the passcode once after the system starts."
        case .inactivity: return "Biometry needs the passcode after 48 hours without authentication."
        case .remoteLock: return "Biometry was locked by an administrator; enter the passcode."
        }
    }
}

/// A context's standing after a successful evaluation: keychain and key calls given that context,
/// and later evaluations on it, need no new prompt until it expires or is invalidated.
public struct ContextAuthorization: Sendable, Equatable {
    public static let defaultLifetime: Double = 300
    public var at: MonotonicStamp
    /// Proven by a biometric match (or a match within the reuse window).
    public var biometric: Bool
    /// Proven by the device passcode.
    public var passcode: Bool

    public init(at: MonotonicStamp, biometric: Bool, passcode: Bool = false) {
        self.at = at
        self.biometric = biometric
        self.passcode = passcode
    }

    func fresh(now: MonotonicStamp, lifetime: Double) -> Bool {
        at.bootID == now.bootID && now.seconds >= at.seconds && now.seconds - at.seconds <= lifetime
    }

    public func satisfies(_ policy: PolicyValue, now: MonotonicStamp, lifetime: Double) -> Bool {
        guard fresh(now: now, lifetime: lifetime) else { return false }
        switch policy {
        case .deviceOwnerAuthentication: return true
        case .deviceOwnerAuthenticationWithBiometrics: return biometric
        default: return false
        }
    }

    /// Whether the passcode itself was proven (items that demand `devicePasscode`).
    public func satisfiesPasscodeOnly(now: MonotonicStamp, lifetime: Double) -> Bool {
        fresh(now: now, lifetime: lifetime) && passcode
    }

    /// A context that proves a second factor keeps the first while it is fresh; the older time
    /// stays, so the combination expires no later than its first part.
    public func merged(
        into earlier: ContextAuthorization?,
        now: MonotonicStamp,
        lifetime: Double
    ) -> ContextAuthorization {
        guard let earlier, earlier.fresh(now: now, lifetime: lifetime) else { return self }
        return ContextAuthorization(
            at: earlier.at,
            biometric: biometric || earlier.biometric,
            passcode: passcode || earlier.passcode
        )
    }
}
