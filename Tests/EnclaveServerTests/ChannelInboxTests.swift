import NIOCore
import NIOEmbedded
import Synchronization
import XCTest

@testable import EnclaveServer

/// The connection's inbox and its handler on NIO's testing channel: reads handed over in order,
/// the client's end after them, a failed socket, reads held back while the task is behind, a
/// channel closed before it was active or a handler removed, a task that is cancelled.
final class ChannelInboxTests: XCTestCase {
    /// Counts the reads that reach the socket (it sits between the inbox's handler and the head).
    private final class ReadCounter: ChannelOutboundHandler, Sendable {
        typealias OutboundIn = ByteBuffer
        let reads = Atomic(0)
        func read(context: ChannelHandlerContext) {
            reads.add(1, ordering: .relaxed)
            context.read()
        }
    }

    private var channel: NIOAsyncTestingChannel!
    private var inbox: ChannelInbox!
    private let counter = ReadCounter()

    override func setUp() async throws {
        channel = NIOAsyncTestingChannel()
        let counter = self.counter
        inbox = try await channel.testingEventLoop.executeInContext { [channel] in
            try channel!.pipeline.syncOperations.addHandler(counter)
            return try ChannelInbox.install(on: channel!)
        }
    }

    override func tearDown() async throws {
        try? await channel.close()
    }

    private func connect() async throws {
        try await channel.connect(to: SocketAddress(unixDomainSocketPath: "/laenclaved-test"))
    }

    private struct TimedOut: Error {}

    /// The inbox's next answer, or a failure after 5 s: a lost wake-up fails the test instead of
    /// hanging it.
    private func next() async throws -> ChannelInbox.Next {
        let inbox = self.inbox!
        return try await answer(of: Task { await inbox.next() })
    }

    /// What `waiting` (a task in `next()`) is told; after 5 s it is cancelled (a cancelled `next`
    /// answers at once) and the test fails.
    private func answer(of waiting: Task<ChannelInbox.Next, Never>) async throws -> ChannelInbox.Next {
        let timer = Task {
            try await Task.sleep(nanoseconds: 5_000_000_000)
            waiting.cancel()
        }
        defer { timer.cancel() }
        let answer = await waiting.value
        if waiting.isCancelled { throw TimedOut() }
        return answer
    }

    private func bytes(_ values: [UInt8]) -> ByteBuffer { ByteBuffer(bytes: values) }

    private func reads() -> Int { counter.reads.load(ordering: .relaxed) }

    func testATaskWaitingIsHandedAReadAsItArrives() async throws {
        try await connect()
        let inbox = self.inbox!
        let waiting = Task { await inbox.next() }
        try await Task.sleep(nanoseconds: 20_000_000)
        try await channel.writeInbound(bytes([1, 2]))
        let answer = try await answer(of: waiting)
        XCTAssertEqual(answer, .bytes(bytes([1, 2])))
    }

    func testTheClientsEndComesAfterItsReads() async throws {
        try await connect()
        try await channel.writeInbound(bytes([1]))
        try await channel.writeInbound(bytes([2]))
        try await channel.testingEventLoop.executeInContext { [channel] in
            channel!.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
        let answers = [try await next(), try await next(), try await next(), try await next()]
        XCTAssertEqual(answers, [.bytes(bytes([1])), .bytes(bytes([2])), .end(.ended), .end(.ended)])
    }

    func testAFailedSocketStopsTheInputAndDropsWhatWasNotTaken() async throws {
        try await connect()
        try await channel.writeInbound(bytes([1]))
        try await channel.testingEventLoop.executeInContext { [channel] in
            channel!.pipeline.fireErrorCaught(ChannelError.ioOnClosedChannel)
        }
        let answer = try await next()
        XCTAssertEqual(answer, .end(.stopped))
        try await channel.closeFuture.get()
    }

    func testReadsAreHeldBackWhileTheTaskIsBehindAndMadeOnceItCatchesUp() async throws {
        try await connect()
        let (high, low) = (ReadQueue<Int>.highWatermark, ReadQueue<Int>.lowWatermark)
        for i in 0..<high { try await channel.writeInbound(bytes([UInt8(i)])) }
        let before = reads()
        channel.read()
        try await channel.testingEventLoop.run()
        XCTAssertEqual(reads(), before, "the read is held back: \(high) reads wait")
        for _ in 0..<(high - low - 1) { _ = try await next() }
        try await channel.testingEventLoop.run()
        XCTAssertEqual(reads(), before, "still above the low watermark")
        _ = try await next()
        try await channel.testingEventLoop.run()
        XCTAssertEqual(reads(), before + 1, "the held-back read is made")
    }

    func testAChannelClosedBeforeItWasActiveEndsTheInput() async throws {
        let inbox = self.inbox!
        let waiting = Task { await inbox.next() }
        try await Task.sleep(nanoseconds: 20_000_000)
        try await channel.close()
        let answer = try await answer(of: waiting)
        XCTAssertEqual(answer, .end(.ended))
    }

    /// What ends the input when a channel closes with no `channelInactive` (its registration
    /// failed): the handler's removal, which NIO does for every closed channel.
    func testTheHandlersRemovalEndsTheInput() async throws {
        try await connect()
        try await channel.writeInbound(bytes([1]))
        let handler = try await channel.pipeline.handler(type: ChannelInboxHandler.self).get()
        try await channel.pipeline.removeHandler(handler).get()
        let answers = [try await next(), try await next()]
        XCTAssertEqual(answers, [.bytes(bytes([1])), .end(.ended)])
    }

    func testACancelledTaskIsToldItStopped() async throws {
        try await connect()
        let inbox = self.inbox!
        let waiting = Task { await inbox.next() }
        try await Task.sleep(nanoseconds: 20_000_000)
        waiting.cancel()
        let answer = await waiting.value
        XCTAssertEqual(answer, .end(.stopped))
        try await channel.writeInbound(bytes([1]))
        let after = try await next()
        XCTAssertEqual(after, .end(.stopped), "a stopped inbox hands over nothing more")
    }
}
