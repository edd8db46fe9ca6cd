import Foundation

/// Wrong application passwords of one keychain item (`.applicationPassword`), counted and delayed
/// per item on the device passcode's schedule (`PasscodeDelaySchedule`): without it an app could
/// try every password against an item as fast as the daemon answers. Our rule (Apple documents
/// none). Unlike the passcode there is no "disabled": anyone guessing could otherwise lock an item
/// for good, so from the 10th failure on every attempt waits the longest delay. On the wall clock
/// (it spans restarts and reboots; only root can move it), and a delay is never longer than its
/// step, whatever the clock did.
public struct PasswordAttempts: Codable, Sendable, Equatable {
    public private(set) var failures = 0
    public private(set) var delayStartedAt: Date?

    public static let longestDelay: Double = 60 * 60

    public init() {}
    public init(failures: Int, delayStartedAt: Date?) {
        self.failures = failures
        self.delayStartedAt = delayStartedAt
    }

    /// Seconds until the next attempt may be checked; nil: now.
    public func retryAfter(now: Date) -> Double? {
        guard let start = delayStartedAt, let length = Self.delay(afterFailures: failures) else { return nil }
        let remaining = min(start.addingTimeInterval(length).timeIntervalSince(now), length)
        return remaining > 0 ? remaining : nil
    }

    public mutating func recordFailure(now: Date) {
        failures += 1
        if Self.delay(afterFailures: failures) != nil { delayStartedAt = now }
    }

    static func delay(afterFailures failures: Int) -> Double? {
        switch PasscodeDelaySchedule.step(afterConsecutiveFailures: failures) {
        case .none: nil
        case .delay(let seconds): seconds
        case .disabled: longestDelay
        }
    }
}
