import NIOCore
import Synchronization

/// One connection's reads on their way from its channel (`ChannelInboxHandler`, on the event loop)
/// to the task that serves it. It stands where `NIOAsyncChannel`'s inbound stream stood: one lock
/// and one continuation instead of the stream's generic machinery, which cost the daemon about
/// 4 µs of a request's 30 (docs/benchmarks.md). Its rules are `ReadQueue`'s.
public final class ChannelInbox: Sendable {
    public enum Next: Sendable, Equatable {
        /// What one read brought.
        case bytes(ByteBuffer)
        case end(ReadEnding)
    }

    private typealias Waiter = UnsafeContinuation<Next, Never>
    private let queue = Mutex(ReadQueue<Waiter>())
    /// Asks the channel to read again (a read held back by the high watermark).
    private let readAgain: @Sendable () -> Void

    init(readAgain: @escaping @Sendable () -> Void) { self.readAgain = readAgain }

    /// Puts the inbox's handler in `channel`'s pipeline, on its event loop, before it reads: the
    /// inbox its reads will arrive in.
    public static func install(on channel: any Channel) throws -> ChannelInbox {
        let inbox = ChannelInbox { [weak channel] in channel?.read() }
        try channel.pipeline.syncOperations.addHandler(ChannelInboxHandler(inbox: inbox))
        return inbox
    }

    func push(_ bytes: ByteBuffer) {
        queue.withLock { $0.push(bytes) }?.resume(returning: .bytes(bytes))
    }

    func end(_ how: ReadEnding) {
        queue.withLock { $0.end(how) }?.resume(returning: .end(how))
    }

    func mayRead() -> Bool { queue.withLock { $0.mayRead() } }

    /// The next read, or how the input ended (then again on every later call). A task that is
    /// cancelled (the daemon is stopping) is told `stopped`.
    public func next() async -> Next {
        await withTaskCancellationHandler {
            await withUnsafeContinuation { (waiter: Waiter) in
                switch queue.withLock({ $0.next(waiter) }) {
                case .take(let bytes, let again):
                    if again { readAgain() }
                    waiter.resume(returning: .bytes(bytes))
                case .end(let how):
                    waiter.resume(returning: .end(how))
                case .wait:
                    break
                }
            }
        } onCancel: {
            end(.stopped)
        }
    }
}

/// The connection's first handler: hands each read to the connection's `ChannelInbox` and tells
/// it how the input ended, holding back reads while the inbox is full. Replies pass by on their
/// way out.
final class ChannelInboxHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let inbox: ChannelInbox

    init(inbox: ChannelInbox) { self.inbox = inbox }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inbox.push(unwrapInboundIn(data))
    }

    func read(context: ChannelHandlerContext) {
        if inbox.mayRead() { context.read() }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent { inbox.end(.ended) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        inbox.end(.ended)
        context.fireChannelInactive()
    }

    /// The socket failed (the client reset it): nothing more is read, and NIO closes the channel.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        inbox.end(.stopped)
        context.close(promise: nil)
    }

    /// Removed, the inbox hears no more: its input ended. So also when the channel closes without
    /// ever becoming active (its registration failed), which fires no `channelInactive`: the task
    /// must not wait for ever.
    func handlerRemoved(context: ChannelHandlerContext) {
        inbox.end(.ended)
    }
}
