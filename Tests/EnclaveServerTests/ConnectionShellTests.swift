import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import Synchronization
import XCTest

@testable import EnclaveServer

/// The daemon's socket side in-process, on NIO's testing channel: frames in, replies out, the
/// hello deadline on the channel's own (virtual) clock, broken framing and a pinned process that
/// changed. No socket, no process, no polling: each reply is awaited as the channel writes it.
final class ConnectionShellTests: XCTestCase {
    private var directory: String!
    private var daemon: EnclaveDaemon!
    private var channel: NIOAsyncTestingChannel!
    private var served: Task<Void, Never>!

    /// A process whose executable the test changes.
    private final class FakePeer: PinnedPeer, Sendable {
        let identity = AppIdentity(name: "/usr/bin/example-app", kind: .app)
        let session: String? = nil
        let changed = Atomic(false)
        func executableChanged() -> Bool { changed.load(ordering: .acquiring) }
    }

    private let process = FakePeer()

    override func setUp() async throws {
        directory = NSTemporaryDirectory() + "connection-shell-\(UUID().uuidString)"
        var config = DaemonConfiguration.inProcess(directory)
        config.helloTimeout = 10
        daemon = try EnclaveDaemon(config: config, clock: ManualClock(), logger: Logger(label: "test"))
        channel = NIOAsyncTestingChannel()
        try await channel.connect(to: SocketAddress(unixDomainSocketPath: "/laenclaved-test"))
        let inbox = try await channel.testingEventLoop.executeInContext { [channel] in
            try ChannelInbox.install(on: channel!)
        }
        let shell = ConnectionShell(daemon: daemon, logger: Logger(label: "test"))
        let peer = PeerIdentity(uid: getuid(), gid: getgid(), pid: getpid(), identity: process.identity)
        let (process, channel) = (self.process, self.channel!)
        served = Task {
            await ConnectionShell.open(channel) { writer in
                await shell.serve(
                    channel,
                    inbox: inbox,
                    writer: writer,
                    peer: peer,
                    process: process,
                    executor: nil
                )
            }
        }
    }

    override func tearDown() async throws {
        try? await channel.close()
        let served = self.served!
        _ = try await within("the shell's end") { await served.value }
        daemon = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func send(_ request: Request, id: UInt64, _ encoding: WireEncoding = .json) async throws {
        try await send(bytes: FrameEncoder.frame(RequestEnvelope(id: id, request: request).encoded(encoding)))
    }

    private func send(bytes: [UInt8]) async throws {
        try await channel.writeInbound(ByteBuffer(bytes: bytes))
    }

    private struct TimedOut: Error { let what: String }

    /// `body`'s result, or a failure after 5 s: a shell that stopped answering fails the test
    /// instead of hanging it (a future's wait does not end on cancellation, so the two race
    /// unstructured; tearDown's close ends the loser).
    private func within<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T
    {
        let pending = Mutex<CheckedContinuation<T, any Error>?>(nil)
        return try await withCheckedThrowingContinuation { continuation in
            pending.withLock { $0 = continuation }
            let finish: @Sendable (Result<T, any Error>) -> Void = { result in
                pending.withLock { $0.take() }?.resume(with: result)
            }
            Task { do { finish(.success(try await body())) } catch { finish(.failure(error)) } }
            Task {
                try? await Task.sleep(nanoseconds: 5_000_000_000)
                finish(.failure(TimedOut(what: what)))
            }
        }
    }

    /// The next reply the shell wrote, decoded from its frame.
    private func reply(_ encoding: WireEncoding = .json) async throws -> ReplyEnvelope {
        try ReplyEnvelope.decode(try await replyFrame(), encoding)
    }

    private func replyFrame() async throws -> [UInt8] {
        let channel = self.channel!
        var buffer = try await within("a reply") { try await channel.waitForOutboundWrite(as: ByteBuffer.self) }
        var decoder = FrameDecoder()
        decoder.append(buffer.readBytes(length: buffer.readableBytes) ?? [])
        return try XCTUnwrap(try decoder.nextFrame())
    }

    private func failureCode(_ envelope: ReplyEnvelope) -> FailureCode? {
        if case .failure(let f) = envelope.reply { return f.code }
        return nil
    }

    private func waitUntilClosed() async throws {
        let channel = self.channel!
        try await within("the connection's close") { try await channel.closeFuture.get() }
        let served = self.served!
        _ = try await within("the shell's end") { await served.value }
    }

    func testAGreetedConnectionIsAnsweredRequestByRequest() async throws {
        try await send(.hello(.init(version: enclaveProtocolVersion)), id: 1)
        let hello = try await reply()
        XCTAssertEqual(hello.id, 1)
        guard case .hello(let h) = hello.reply else { return XCTFail("\(hello)") }
        XCTAssertEqual(h.app, "/usr/bin/example-app")
        // Two frames in one read, and one frame split over two: each answered, in order.
        var both = FrameEncoder.frame(
            RequestEnvelope(id: 2, request: .canEvaluate(.init(context: "a", policy: 1))).encoded()
        )
        both += FrameEncoder.frame(RequestEnvelope(id: 3, request: .status).encoded())
        try await send(bytes: Array(both.prefix(7)))
        try await send(bytes: Array(both.dropFirst(7)))
        let second = try await reply()
        let third = try await reply()
        XCTAssertEqual([second.id, third.id], [2, 3])
        guard case .canEvaluate = second.reply, case .status = third.reply else { return XCTFail("\(second) \(third)") }
    }

    /// A client that offers the binary coding in its hello is answered in JSON, told so, and from
    /// then on read and answered in binary, both ways; a JSON message after that is malformed.
    func testAClientThatOffersTheBinaryCodingSpeaksItAfterHello() async throws {
        try await send(.hello(.init(version: enclaveProtocolVersion, encodings: ["zstd", "binary2"])), id: 1)
        guard case .hello(let h) = try await reply().reply else { return XCTFail("a hello answer in JSON") }
        XCTAssertEqual(h.wireEncoding, .binary)
        try await send(.canEvaluate(.init(context: "a", policy: 1)), id: 2, .binary)
        let frame = try await replyFrame()
        XCTAssertNil(try? ReplyEnvelope.decode(frame, .json), "the answer is not JSON")
        let answer = try ReplyEnvelope.decode(frame, .binary)
        XCTAssertEqual(answer.id, 2)
        guard case .canEvaluate = answer.reply else { return XCTFail("\(answer)") }
        try await send(.status, id: 3, .json)
        let malformed = try await reply(.binary)
        XCTAssertEqual(failureCode(malformed), .malformedMessage)
        try await send(.status, id: 4, .binary)
        let status = try await reply(.binary)
        XCTAssertEqual(status.id, 4)
        guard case .status = status.reply else { return XCTFail("the connection goes on: \(status)") }
    }

    /// A coding the daemon does not know, or none offered, leaves the connection in JSON.
    func testAClientThatOffersNoKnownCodingStaysInJSON() async throws {
        try await send(.hello(.init(version: enclaveProtocolVersion, encodings: ["zstd"])), id: 1)
        guard case .hello(let h) = try await reply().reply else { return XCTFail("a hello answer") }
        XCTAssertNil(h.encoding)
        try await send(.status, id: 2)
        guard case .status = try await reply().reply else { return XCTFail("a JSON answer") }
    }

    func testARequestBeforeHelloIsRefusedAndTheConnectionGoesOn() async throws {
        try await send(.status, id: 5)
        let refused = try await reply()
        XCTAssertEqual(refused.id, 5)
        XCTAssertEqual(failureCode(refused), .outOfOrder)
        try await send(.hello(.init(version: enclaveProtocolVersion)), id: 6)
        let hello = try await reply()
        guard case .hello = hello.reply else { return XCTFail("\(hello)") }
    }

    func testAnotherProtocolVersionIsRefusedAndClosed() async throws {
        try await send(.hello(.init(version: enclaveProtocolVersion + 1)), id: 1)
        let refused = try await reply()
        XCTAssertEqual(failureCode(refused), .unsupportedVersion)
        try await waitUntilClosed()
    }

    func testAConnectionThatNeverSaysHelloIsClosedAtTheDeadline() async throws {
        // Its refusal shows the shell reads (the deadline was set before the first read).
        try await send(.status, id: 1)
        let refused = try await reply()
        XCTAssertEqual(failureCode(refused), .outOfOrder)
        await channel.testingEventLoop.advanceTime(by: .seconds(9))
        let isActive = try await channel.testingEventLoop.executeInContext { [channel] in channel!.isActive }
        XCTAssertTrue(isActive, "still open before the deadline")
        await channel.testingEventLoop.advanceTime(by: .seconds(2))
        try await waitUntilClosed()
    }

    func testAGreetedConnectionOutlivesTheHelloDeadline() async throws {
        try await send(.hello(.init(version: enclaveProtocolVersion)), id: 1)
        _ = try await reply()
        await channel.testingEventLoop.advanceTime(by: .seconds(60))
        try await send(.status, id: 2)
        let status = try await reply()
        guard case .status = status.reply else { return XCTFail("\(status)") }
    }

    func testAnOversizedFrameIsAnsweredAsMalformedAndClosed() async throws {
        let declared = UInt32(WireLimits.maxPayloadBytes + 1)
        try await send(bytes: withUnsafeBytes(of: declared.bigEndian) { Array($0) } + [0x7B])
        let refused = try await reply()
        XCTAssertEqual(refused.id, 0)
        XCTAssertEqual(failureCode(refused), .malformedMessage)
        try await waitUntilClosed()
    }

    func testAnUnreadableRequestIsAnsweredAndTheConnectionGoesOn() async throws {
        try await send(bytes: FrameEncoder.frame(Array(#"{"id": 4, "op": "noSuchThing", "args": {}}"#.utf8)))
        let unknown = try await reply()
        XCTAssertEqual(unknown.id, 4)
        XCTAssertEqual(failureCode(unknown), .unknownOperation)
        try await send(bytes: FrameEncoder.frame(Array("not json".utf8)))
        let malformed = try await reply()
        XCTAssertEqual(failureCode(malformed), .malformedMessage)
        try await send(.hello(.init(version: enclaveProtocolVersion)), id: 5)
        let hello = try await reply()
        guard case .hello = hello.reply else { return XCTFail("\(hello)") }
    }

    func testAProcessThatRanAnotherExecutableIsRefusedAndClosed() async throws {
        try await send(.hello(.init(version: enclaveProtocolVersion)), id: 1)
        _ = try await reply()
        process.changed.store(true, ordering: .releasing)
        try await send(.status, id: 2)
        let refused = try await reply()
        XCTAssertEqual(refused.id, 0)
        XCTAssertEqual(failureCode(refused), .notPermitted)
        try await waitUntilClosed()
    }

    func testAStreamThatEndsInsideAFrameIsAnsweredAsMalformed() async throws {
        try await send(.hello(.init(version: enclaveProtocolVersion)), id: 1)
        _ = try await reply()
        try await send(bytes: Array(FrameEncoder.frame(RequestEnvelope(id: 2, request: .status).encoded()).prefix(6)))
        // The client shuts down its side: the daemon reads the end of its input.
        try await channel.testingEventLoop.executeInContext { [channel] in
            channel!.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
        let refused = try await reply()
        XCTAssertEqual(failureCode(refused), .malformedMessage)
        try await waitUntilClosed()
    }
}
