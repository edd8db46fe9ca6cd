import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A reading of the monotonic clock that counts through suspend (CLOCK_BOOTTIME), tagged with the
/// boot it belongs to: such readings are comparable only within one boot.
public struct MonotonicStamp: Codable, Sendable, Equatable {
    public var bootID: String
    public var seconds: Double
    public init(bootID: String, seconds: Double) {
        self.bootID = bootID
        self.seconds = seconds
    }
}

/// The daemon's sense of time, injected so the rules can be tested without waiting.
public protocol EnclaveClock: Sendable {
    /// Monotonic now, for delays and reuse windows (cannot be moved by setting the date).
    func monotonic() -> MonotonicStamp
    /// Wall-clock now, for the 48-hour rule, which must also span reboots.
    func wall() -> Date
}

public struct SystemClock: EnclaveClock {
    public let bootID: String
    public init() {
        let raw = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? "unknown-boot"
        bootID = raw.trimmingCharacters(in: .whitespacesAndNewlines)
    }
    public func monotonic() -> MonotonicStamp {
        var ts = timespec()
        #if os(Linux)
        clock_gettime(CLOCK_BOOTTIME, &ts)
        #else
        clock_gettime(CLOCK_MONOTONIC, &ts)
        #endif
        return MonotonicStamp(bootID: bootID, seconds: Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9)
    }
    public func wall() -> Date { Date() }
}

/// A clock that moves only when told to: the rules' unit tests and the benchmark use it.
public final class ManualClock: EnclaveClock, Sendable {
    private struct Now {
        var bootID: String
        var seconds: Double
        var wall: Date
    }
    private let now: Mutex<Now>

    public init(
        bootID: String = "boot-1",
        seconds: Double = 1000,
        wall: Date = Date(timeIntervalSince1970: 1_800_000_000)
    ) {
        now = Mutex(Now(bootID: bootID, seconds: seconds, wall: wall))
    }
    public func monotonic() -> MonotonicStamp {
        now.withLock { MonotonicStamp(bootID: $0.bootID, seconds: $0.seconds) }
    }
    public func wall() -> Date { now.withLock { $0.wall } }
    public func advance(_ interval: Double) {
        now.withLock {
            $0.seconds += interval
            $0.wall += interval
        }
    }
    /// A reboot: a new boot id, the monotonic clock restarts near zero, wall time goes on.
    public func reboot(bootID newID: String, after interval: Double = 30) {
        now.withLock {
            $0.bootID = newID
            $0.seconds = 5
            $0.wall += interval
        }
    }
}
