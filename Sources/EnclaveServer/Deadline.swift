import NIOCore
import NIOPosix

/// A one-shot timer whose cancellation frees it at once, for the timeouts every prompt starts
/// (the prompt's own, the wait for the user's prompt, the agent's answer). A cancelled
/// `Task.sleep` keeps its task — about 750 bytes — until the original deadline, so a sleeping
/// task per prompt held the memory of every prompt of the last `prompt-timeout` (300 s): a client
/// opening and cancelling evaluations grew the daemon by ~1 MB a second. NIO's scheduled task
/// leaves the event loop's queue when cancelled.
struct Deadline: Sendable {
    private let scheduled: Scheduled<Void>

    /// Calls `fire` after `seconds` (negative and NaN: at once; at most 10⁹ s), unless cancelled
    /// first. `fire` never runs inside this initializer nor inside `cancel()`, so callers may make
    /// and cancel deadlines while holding a lock that `fire` takes (`PromptAgent` does).
    init(
        after seconds: Double,
        on eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.any(),
        _ fire: @escaping @Sendable () -> Void
    ) {
        scheduled = eventLoop.scheduleTask(in: .nanoseconds(Int64(min(max(0, seconds), 1e9) * 1e9)), fire)
    }

    func cancel() { scheduled.cancel() }
}
