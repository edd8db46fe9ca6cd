/// How long the daemon refuses passcode attempts after consecutive failures (behavior.md §3,
/// after Apple's Platform Security guide; "disabled" at 10 is our choice).
public enum PasscodeDelaySchedule {
    public enum Step: Equatable, Sendable {
        case none
        case delay(seconds: Double)
        /// No more attempts until an administrator resets the counter.
        case disabled
    }

    public static let disabledAfter = 10

    public static func step(afterConsecutiveFailures failures: Int) -> Step {
        switch failures {
        case ..<5: return .none
        case 5: return .delay(seconds: 60)
        case 6: return .delay(seconds: 5 * 60)
        case 7, 8: return .delay(seconds: 15 * 60)
        case 9: return .delay(seconds: 60 * 60)
        default: return .disabled
        }
    }
}
