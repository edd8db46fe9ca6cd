import EnclaveProtocol
import Foundation
import XCTest

@testable import EnclaveClient

#if canImport(Glibc)
import Glibc
#endif

/// The client's connection against a scripted daemon on a real Unix socket in this process: who
/// reads the socket (a blocking request reads its own reply; callback requests have the
/// connection's thread), replies out of order, several in one segment, and a daemon that hangs up.
final class EnclaveConnectionTests: XCTestCase {
    /// Answers `hello` itself; every other request goes to `handle`, which answers now or later.
    private final class ScriptedDaemon: @unchecked Sendable {
        let path: String
        private let listener: Int32
        private var connection: Int32 = -1
        private let lock = NSLock()
        private let accepted = DispatchSemaphore(value: 0)
        private var script: @Sendable (RequestEnvelope, ScriptedDaemon) -> Void = { _, _ in }
        /// Whether it takes up the binary coding a client offers (a daemon from before it does not).
        private let offersBinary: Bool
        private var coding = WireEncoding.json
        /// How each request after hello was coded, in order.
        private(set) var codings: [WireEncoding] {
            get { lock.withLock { seen } }
            set { lock.withLock { seen = newValue } }
        }
        private var seen: [WireEncoding] = []
        /// What the daemon does with each request but hello (set before the client connects).
        var handle: @Sendable (RequestEnvelope, ScriptedDaemon) -> Void {
            get { lock.withLock { script } }
            set { lock.withLock { script = newValue } }
        }

        init(offersBinary: Bool = false) throws {
            self.offersBinary = offersBinary
            path = NSTemporaryDirectory() + "enclave-connection-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
            listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard listener >= 0, bound == 0, listen(listener, 4) == 0 else { throw POSIXError(.EADDRINUSE) }
            Thread { [self] in serve() }.start()
        }

        private func serve() {
            let fd = accept(listener, nil, nil)
            lock.withLock { connection = fd }
            accepted.signal()
            var decoder = FrameDecoder()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard n > 0 else { return }
                decoder.append(buffer[0..<n])
                // Each frame is read in whichever coding it is in (the two never read each other's),
                // so a client that speaks the wrong one is recorded, not left waiting.
                while let frame = try? decoder.nextFrame(),
                    case let (envelope, spoken)? = WireEncoding.allCases.lazy.compactMap({ encoding in
                        (try? RequestEnvelope.decode(frame, encoding)).map { ($0, encoding) }
                    }).first
                {
                    if case .hello(let hello) = envelope.request {
                        let chosen = offersBinary ? hello.chosenEncoding : .json
                        send([
                            ReplyEnvelope(
                                id: envelope.id,
                                reply: .hello(
                                    HelloReply(
                                        version: 1,
                                        mode: .user,
                                        uid: getuid(),
                                        app: "/test",
                                        encoding: chosen == .json ? nil : chosen.rawValue
                                    )
                                )
                            )
                        ])
                        lock.withLock { coding = chosen }
                    } else {
                        lock.withLock { seen.append(spoken) }
                        handle(envelope, self)
                    }
                }
            }
        }

        /// Writes the replies' frames in one `send`, so the client gets them in one segment.
        func send(_ replies: [ReplyEnvelope]) {
            let coding = lock.withLock { self.coding }
            let bytes = replies.flatMap { FrameEncoder.frame($0.encoded(coding)) }
            lock.withLock {
                _ = bytes.withUnsafeBytes { Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }

        /// Holds each request until `count` have come, then answers them newest first, in one write
        /// (one segment for the client, its replies out of order).
        func answerInBatches(of count: Int) {
            let held = LockedBox<[RequestEnvelope]>([])
            handle = { envelope, daemon in
                let ready: [RequestEnvelope]? = held.withValue { held in
                    held.append(envelope)
                    guard held.count == count else { return nil }
                    defer { held.removeAll() }
                    return held
                }
                if let ready { daemon.send(ready.reversed().map { Marked.echo($0)! }) }
            }
        }

        func hangUp() {
            lock.withLock { _ = shutdown(connection, Int32(SHUT_RDWR)) }
        }

        deinit {
            close(listener)
            lock.withLock { if connection >= 0 { _ = shutdown(connection, Int32(SHUT_RDWR)) } }
            unlink(path)
        }
    }

    func testABlockingRequestIsAnsweredWhileACallbackRequestWaitsForItsReply() throws {
        let daemon = try ScriptedDaemon()
        let held = LockedBox<RequestEnvelope?>(nil)
        daemon.handle = { envelope, daemon in
            if case .enroll(let a) = envelope.request, a.name == "slow" {
                held.value = envelope
                return
            }
            daemon.send([Marked.echo(envelope)!])
        }
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        let slowAnswered = expectation(description: "the held request is answered last")
        let slow = LockedBox<String?>(nil)
        connection.send(Marked.request("slow")) { result in
            slow.value = (try? result.get()).flatMap { Marked.marker(of: $0) }
            slowAnswered.fulfill()
        }
        for i in 0..<20 {
            XCTAssertEqual(Marked.marker(of: try connection.request(Marked.request("quick-\(i)"))), "quick-\(i)")
        }
        XCTAssertNil(slow.value)
        daemon.send([Marked.echo(try XCTUnwrap(held.value))!])
        wait(for: [slowAnswered], timeout: 5)
        XCTAssertEqual(slow.value, "slow")
        XCTAssertFalse(connection.closed)
    }

    /// The client offers the binary coding in its hello; a daemon that takes it up is then spoken
    /// to and read in it, for blocking and callback requests alike. One that does not (a daemon
    /// from before the coding, as every other daemon here) is spoken to in JSON.
    func testTheClientSpeaksTheCodingTheDaemonsHelloNamed() throws {
        for offersBinary in [true, false] {
            let daemon = try ScriptedDaemon(offersBinary: offersBinary)
            daemon.handle = { envelope, daemon in daemon.send([Marked.echo(envelope)!]) }
            let connection = try EnclaveConnection(socketPath: daemon.path)
            defer { connection.close() }
            XCTAssertEqual(connection.hello.wireEncoding, offersBinary ? .binary : .json)
            XCTAssertEqual(Marked.marker(of: try connection.request(Marked.request("blocking"))), "blocking")
            let answered = expectation(description: "the callback request's answer")
            connection.send(Marked.request("callback")) { result in
                XCTAssertEqual((try? result.get()).flatMap { Marked.marker(of: $0) }, "callback")
                answered.fulfill()
            }
            wait(for: [answered], timeout: 5)
            XCTAssertEqual(daemon.codings, offersBinary ? [.binary, .binary] : [.json, .json])
        }
    }

    func testRepliesInOneSegmentAndOutOfOrderReachTheirRequests() throws {
        let daemon = try ScriptedDaemon()
        let threads = 6
        // Every thread's request held until all have sent.
        daemon.answerInBatches(of: threads)
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        for round in 0..<20 { blockingRound(round, threads: threads, on: connection) }
    }

    /// `threads` threads of their own (every request must be waiting before the daemon answers
    /// any) each send one blocking request of round `round`, and each gets its own reply.
    private func blockingRound(
        _ round: Int,
        threads: Int,
        on connection: EnclaveConnection,
        file: StaticString = #filePath,
        line: UInt = #line
    ) {
        let answers = LockedBox<[Int: String]>([:])
        let group = DispatchGroup()
        for i in 0..<threads {
            group.enter()
            Thread {
                let reply = try? connection.request(Marked.request("r\(round)-t\(i)"))
                answers.withValue { $0[i] = reply.flatMap { Marked.marker(of: $0) } }
                group.leave()
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 10), .success, file: file, line: line)
        XCTAssertEqual(
            answers.value,
            Dictionary(uniqueKeysWithValues: (0..<threads).map { ($0, "r\(round)-t\($0)") }),
            file: file,
            line: line
        )
    }

    func testBlockingAndAsyncRequestsFromManyThreadsEachGetTheirOwnReply() async throws {
        let daemon = try ScriptedDaemon()
        daemon.handle = { envelope, daemon in daemon.send([Marked.echo(envelope)!]) }
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<4 {
                group.addTask {
                    for i in 0..<300 {
                        let reply = try await connection.request(Marked.request("async-\(t)-\(i)"), onEvent: nil)
                        XCTAssertEqual(Marked.marker(of: reply), "async-\(t)-\(i)")
                    }
                }
            }
            let blocking = Thread.detachedResult {
                for t in 0..<4 {
                    for i in 0..<300
                    where Marked.marker(of: try connection.request(Marked.request("sync-\(t)-\(i)")))
                        != "sync-\(t)-\(i)"
                    {
                        return false
                    }
                }
                return true
            }
            try await group.waitForAll()
            let allMatched = try await blocking.value
            XCTAssertTrue(allMatched)
        }
    }

    /// Threads sharing one connection, as an app's threads share its keychain connection: a reply
    /// wakes the thread waiting for it, and a freed reader role one thread that still waits; the
    /// others sleep on. (One condition broadcast for everything woke every waiting thread for
    /// every reply: about threads − 2 wake-ups for nothing a request.)
    func testAReplyWakesOnlyTheThreadThatWaitsForIt() throws {
        let daemon = try ScriptedDaemon()
        daemon.handle = { envelope, daemon in daemon.send([Marked.echo(envelope)!]) }
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        let threads = 8
        let perThread = 300
        let group = DispatchGroup()
        let mismatches = LockedBox(0)
        for t in 0..<threads {
            group.enter()
            Thread {
                for i in 0..<perThread {
                    let reply = try? connection.request(Marked.request("t\(t)-\(i)"))
                    if reply.flatMap({ Marked.marker(of: $0) }) != "t\(t)-\(i)" { mismatches.withValue { $0 += 1 } }
                }
                group.leave()
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(mismatches.value, 0)
        let wasted = connection.state.withLock { connection.wakesForNothing }
        print("wake-ups for nothing: \(wasted) for \(threads * perThread) requests")
        XCTAssertLessThan(wasted, threads * perThread / 2, "threads woke for replies that were not theirs")
    }

    func testBlockingRequestsAndDiscardedRepliesStartNoThread() throws {
        let daemon = try ScriptedDaemon()
        daemon.handle = { envelope, daemon in
            if case .invalidate = envelope.request {
                daemon.send([ReplyEnvelope(id: envelope.id, reply: .ok)])
            } else {
                daemon.send([Marked.echo(envelope)!])
            }
        }
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        for i in 0..<50 {
            XCTAssertEqual(Marked.marker(of: try connection.request(Marked.request("b\(i)"))), "b\(i)")
            connection.sendDiscardingReply(.invalidate(.init(context: "c\(i)")))
            XCTAssertFalse(
                connection.readerThreadRunning,
                "the calling thread reads its own reply; a dropped reply needs no reader"
            )
        }
    }

    func testTheConnectionsThreadEndsOnceNoCallbackRequestWaits() throws {
        let daemon = try ScriptedDaemon()
        daemon.handle = { envelope, daemon in daemon.send([Marked.echo(envelope)!]) }
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        let answered = expectation(description: "callback answered")
        connection.send(Marked.request("callback")) { _ in answered.fulfill() }
        wait(for: [answered], timeout: 5)
        // A blocking reply passes through the thread (it still reads after the callback's reply), which then ends.
        XCTAssertEqual(Marked.marker(of: try connection.request(Marked.request("blocking"))), "blocking")
        let deadline = Date().addingTimeInterval(5)
        while connection.readerThreadRunning && Date() < deadline { usleep(1000) }
        XCTAssertFalse(connection.readerThreadRunning)
        // And the next callback request starts it again.
        let again = expectation(description: "second callback answered")
        connection.send(Marked.request("again")) { result in
            if Marked.marker(of: (try? result.get()) ?? .ok) == "again" { again.fulfill() }
        }
        wait(for: [again], timeout: 5)
    }

    func testPastTheLimitDiscardedRepliesAreReadOut() throws {
        let daemon = try ScriptedDaemon()
        daemon.handle = { envelope, daemon in daemon.send([ReplyEnvelope(id: envelope.id, reply: .ok)]) }
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        for i in 0..<(EnclaveConnection.discardedLimit * 3) {
            connection.sendDiscardingReply(.invalidate(.init(context: "c\(i)")))
        }
        // Nobody else reads: past the limit the connection's thread reads them out.
        XCTAssertTrue(connection.readerThreadRunning)
        XCTAssertEqual(try connection.request(.status), .ok)
        XCTAssertFalse(connection.closed)
    }

    /// A connection an app drops without `close()` after an async request keeps no thread and is
    /// released (its thread waits for more only a short while).
    func testADroppedConnectionIsReleasedAfterAnAsyncRequest() throws {
        let daemon = try ScriptedDaemon()
        daemon.handle = { envelope, daemon in daemon.send([Marked.echo(envelope)!]) }
        weak var dropped: EnclaveConnection?
        do {
            let connection = try EnclaveConnection(socketPath: daemon.path)
            dropped = connection
            let answered = expectation(description: "answered")
            connection.send(Marked.request("async")) { _ in answered.fulfill() }
            wait(for: [answered], timeout: 5)
        }
        let deadline = Date().addingTimeInterval(5)
        while dropped != nil && Date() < deadline { usleep(10_000) }
        XCTAssertNil(dropped, "the lingering thread let the connection go")
    }

    func testEventsReachTheCallbackRequestBeforeItsFinalReply() throws {
        let daemon = try ScriptedDaemon()
        daemon.handle = { envelope, daemon in
            let progress = Reply.enrollProgress(EnrolmentProgress(stage: 1, stages: 2, message: "again"))
            daemon.send([
                ReplyEnvelope(id: envelope.id, reply: progress), ReplyEnvelope(id: envelope.id, reply: progress),
                ReplyEnvelope(id: envelope.id, reply: .ok),
            ])
        }
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        let events = LockedBox(0)
        let done = expectation(description: "final reply")
        connection.send(
            .status,
            onEvent: { _ in events.withValue { $0 += 1 } },
            completion: { result in
                XCTAssertEqual(try? result.get(), .ok)
                XCTAssertEqual(events.value, 2)
                done.fulfill()
            }
        )
        wait(for: [done], timeout: 5)
        // A blocking request's events have no one to go to: it gets its final reply only.
        XCTAssertEqual(try connection.request(.status), .ok)
    }

    func testAnIdleConnectionSeesTheDaemonHangUp() throws {
        let daemon = try ScriptedDaemon()
        daemon.handle = { envelope, daemon in daemon.send([Marked.echo(envelope)!]) }
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        XCTAssertEqual(Marked.marker(of: try connection.request(Marked.request("before"))), "before")
        XCTAssertFalse(connection.closed)
        daemon.hangUp()
        let deadline = Date().addingTimeInterval(5)
        while !connection.closed && Date() < deadline { usleep(1000) }
        XCTAssertTrue(connection.closed, "nothing reads an idle connection: closed must ask the kernel")
        XCTAssertThrowsError(try connection.request(Marked.request("after"))) {
            XCTAssertEqual($0 as? EnclaveClientError, .connectionLost)
        }
    }

    func testRequestsWaitingWhenTheDaemonHangsUpAreAnsweredConnectionLost() throws {
        let daemon = try ScriptedDaemon()
        let received = DispatchSemaphore(value: 0)
        daemon.handle = { _, _ in received.signal() }
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        let callbackAnswer = expectation(description: "the callback request ends")
        connection.send(Marked.request("callback")) { result in
            if case .failure(.connectionLost) = result { callbackAnswer.fulfill() }
        }
        let blocking = BlockingRequest(Marked.request("blocking"), on: connection)
        XCTAssertEqual(received.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(received.wait(timeout: .now() + 5), .success)
        daemon.hangUp()
        wait(for: [callbackAnswer], timeout: 5)
        XCTAssertEqual(blocking.ended.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(blocking.failure.value, .connectionLost)
        XCTAssertTrue(connection.closed)
    }

    /// One thread reads its own reply, the others sleep: closing ends the one reading and wakes
    /// every one asleep.
    func testClosingEndsTheRequestReadingAndEveryOneAsleep() throws {
        let daemon = try ScriptedDaemon()
        let received = DispatchSemaphore(value: 0)
        daemon.handle = { _, _ in received.signal() }
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        let blocking = (0..<4).map { BlockingRequest(Marked.request("never answered \($0)"), on: connection) }
        for _ in blocking { XCTAssertEqual(received.wait(timeout: .now() + 5), .success) }
        connection.close()
        for request in blocking {
            XCTAssertEqual(request.ended.wait(timeout: .now() + 5), .success)
            XCTAssertEqual(request.failure.value, .connectionLost)
        }
        XCTAssertThrowsError(try connection.request(Marked.request("after close")))
    }

    /// The connection's own thread reads (a callback request waits) while blocking threads sleep:
    /// each is woken by its reply, whichever order they come in, and the callback gets its own.
    func testThreadsAsleepWhileTheConnectionsThreadReadsEachGetTheirReply() throws {
        let daemon = try ScriptedDaemon()
        let threads = 5
        // Every request of the round held, the callback's too.
        daemon.answerInBatches(of: threads + 1)
        let connection = try EnclaveConnection(socketPath: daemon.path)
        defer { connection.close() }
        for round in 0..<10 {
            let callback = LockedBox<String?>(nil)
            let called = DispatchSemaphore(value: 0)
            connection.send(Marked.request("callback-\(round)")) { result in
                callback.value = (try? result.get()).flatMap { Marked.marker(of: $0) }
                called.signal()
            }
            let deadline = Date().addingTimeInterval(5)
            while !connection.state.withLock({ connection.readerBusy }), Date() < deadline { usleep(1000) }
            blockingRound(round, threads: threads, on: connection)
            XCTAssertEqual(called.wait(timeout: .now() + 10), .success)
            XCTAssertEqual(callback.value, "callback-\(round)")
        }
    }
}

/// A request carrying a marker the scripted daemon echoes back, so a reply's owner is checked.
private enum Marked {
    static func request(_ marker: String) -> Request { .enroll(.init(name: marker)) }
    static func marker(of reply: Reply) -> String? {
        if case .enrolments(let names) = reply { return names.first }
        return nil
    }
    static func echo(_ envelope: RequestEnvelope) -> ReplyEnvelope? {
        guard case .enroll(let a) = envelope.request else { return nil }
        return ReplyEnvelope(id: envelope.id, reply: .enrolments([a.name]))
    }
}

/// A blocking request on a thread of its own; `ended` is signalled when it returns or throws.
private struct BlockingRequest {
    let failure = LockedBox<EnclaveClientError?>(nil)
    let ended = DispatchSemaphore(value: 0)

    init(_ request: Request, on connection: EnclaveConnection) {
        let (failure, ended) = (failure, ended)
        Thread {
            do { _ = try connection.request(request) } catch { failure.value = error as? EnclaveClientError }
            ended.signal()
        }.start()
    }
}

private final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
    func withValue<T>(_ body: (inout Value) throws -> T) rethrows -> T { try lock.withLock { try body(&stored) } }
}

extension Thread {
    /// Runs `body` on a thread of its own (blocking requests must not run on the cooperative pool).
    fileprivate static func detachedResult<T: Sendable>(_ body: @escaping @Sendable () throws -> T) -> Task<T, Error> {
        Task {
            try await withCheckedThrowingContinuation { continuation in
                Thread { continuation.resume(with: Result { try body() }) }.start()
            }
        }
    }
}
