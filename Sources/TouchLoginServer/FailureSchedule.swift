/// Consecutive failed attempts for one key, as the store keeps them.
public struct FailureRecord: Sendable, Equatable {
    public var failures: Int
    public var lastFailureAt: Double
    public init(failures: Int, lastFailureAt: Double) {
        self.failures = failures
        self.lastFailureAt = lastFailureAt
    }
}

/// How long an attempt must wait after consecutive failures: the first `freeFailures` cost
/// nothing; once that many happened, each attempt waits `firstDelay` after the last failure,
/// doubling with each further failure up to `maxDelay`; after
/// `lockAfter` failures (if set) no attempt is admitted until a success elsewhere or an operator
/// clears the record. A success clears the record.
public struct FailureSchedule: Sendable, Equatable {
    public var freeFailures: Int
    public var firstDelay: Double
    public var maxDelay: Double
    public var lockAfter: Int?

    public init(freeFailures: Int, firstDelay: Double, maxDelay: Double, lockAfter: Int? = nil) {
        self.freeFailures = freeFailures
        self.firstDelay = firstDelay
        self.maxDelay = maxDelay
        self.lockAfter = lockAfter
    }

    /// The wait after `failures` consecutive failures.
    public func delay(after failures: Int) -> Double {
        guard failures >= freeFailures else { return 0 }
        let doublings = min(failures - freeFailures, 62)
        return min(maxDelay, firstDelay * Double(1 << doublings))
    }

    public func decide(_ record: FailureRecord?, at now: Double) -> ThrottleDecision {
        guard let record else { return .admitted }
        if let lockAfter, record.failures >= lockAfter { return .locked }
        let wait = record.lastFailureAt + delay(after: record.failures) - now
        return wait > 0 ? .wait(seconds: wait) : .admitted
    }
}

public enum ThrottleDecision: Sendable, Equatable {
    case admitted
    case wait(seconds: Double)
    case locked

    /// The stricter of two decisions: a lock over any wait, the longer wait over the shorter.
    public func combined(with other: ThrottleDecision) -> ThrottleDecision {
        switch (self, other) {
        case (.locked, _), (_, .locked): return .locked
        case let (.wait(a), .wait(b)): return .wait(seconds: max(a, b))
        case (.wait, .admitted): return self
        case (.admitted, _): return other
        }
    }
}
