import NIOCore

/// Runs a connection's tasks — and the user's actor while such a task calls it — on the thread of
/// the connection's event loop: a request is read, answered and written without waking another
/// thread, which is most of a round trip's cost on a small machine (SE-0417 task executors).
public final class EventLoopTaskExecutor: TaskExecutor, Sendable {
    public let eventLoop: any EventLoop

    public init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
