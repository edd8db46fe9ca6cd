import Foundation
import Synchronization

/// The time a test decides: starts at a fixed instant and moves only when told.
public final class ManualClock: Sendable {
    private let seconds: Mutex<Double>

    public init(_ start: Double = 1_800_000_000) { seconds = Mutex(start) }

    public var now: Double { seconds.withLock { $0 } }

    public func advance(by interval: Double) { seconds.withLock { $0 += interval } }

    /// For `LoginService(clock:)`.
    public var read: @Sendable () -> Double { { self.now } }
}
