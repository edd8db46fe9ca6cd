import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

#if canImport(Glibc)
import Glibc
#endif

// MARK: - The tests

/// behavior.md §7: every malformed, oversized, truncated or out-of-order message gets a clear error
/// answer or a clean close; the daemon keeps serving everyone else, loses no state, never crashes.
final class BadInputTests: XCTestCase {
    private var enclave: TestEnclave!
    private var baseline: UserStatus!

    override func setUpWithError() throws {
        enclave = try TestEnclave()
        baseline = try freshStatus()
        XCTAssertTrue(baseline.passcodeSet)
        XCTAssertEqual(baseline.enrolledCount, 1)
        XCTAssertEqual(try enclave.enrolments(), ["right-index-finger"])
        XCTAssertEqual(baseline.biometricFailures, 0)
        XCTAssertEqual(baseline.passcodeFailures, 0)
        XCTAssertEqual(baseline.queuedEvents, 0)
    }

    override func tearDown() {
        enclave = nil
        baseline = nil
    }

    // MARK: Helpers

    /// `status` over a brand-new connection (not the kit's cached control connection).
    private func freshStatus() throws -> UserStatus {
        let connection = try EnclaveConnection(socketPath: enclave.socketPath)
        defer { connection.close() }
        guard case .status(let s) = try connection.request(.status) else {
            throw EnclaveClientError.protocolError("status did not answer with a status")
        }
        return s
    }

    private func raw() throws -> RawClient { try RawClient(path: enclave.socketPath) }

    /// A raw connection that has already said hello.
    private func greeted(id: UInt64 = 1, file: StaticString = #filePath, line: UInt = #line) throws -> RawClient {
        let client = try raw()
        client.sendRequest(id: id, op: "hello", args: ["version": enclaveProtocolVersion])
        let reply = try client.readReply()
        assertKind(reply, id: id, kind: "hello", file: file, line: line)
        return client
    }

    private func assertKind(
        _ reply: [String: Any]?,
        id: UInt64,
        kind: String,
        file: StaticString = #filePath,
        line: UInt = #line
    ) {
        guard let reply else {
            return XCTFail("the daemon closed instead of answering \(kind)", file: file, line: line)
        }
        XCTAssertEqual(number(reply["id"]), Int64(id), "reply id in \(reply)", file: file, line: line)
        let body = reply["reply"] as? [String: Any]
        XCTAssertEqual(body?["kind"] as? String, kind, "reply kind in \(reply)", file: file, line: line)
    }

    /// Asserts `{"id": id, "reply": {"kind": "failure", "value": {"code": code, "message": "…"}}}`.
    private func assertFailure(
        _ reply: [String: Any]?,
        id: UInt64,
        code: FailureCode,
        file: StaticString = #filePath,
        line: UInt = #line
    ) {
        guard let reply else {
            return XCTFail("the daemon closed instead of answering \(code.rawValue)", file: file, line: line)
        }
        XCTAssertEqual(Set(reply.keys), ["id", "reply"], "\(reply)", file: file, line: line)
        XCTAssertEqual(number(reply["id"]), Int64(id), "reply id in \(reply)", file: file, line: line)
        guard let body = reply["reply"] as? [String: Any] else {
            return XCTFail("no reply object in \(reply)", file: file, line: line)
        }
        XCTAssertEqual(body["kind"] as? String, "failure", "\(reply)", file: file, line: line)
        guard let value = body["value"] as? [String: Any] else {
            return XCTFail("no failure value in \(reply)", file: file, line: line)
        }
        XCTAssertEqual(value["code"] as? String, code.rawValue, "\(reply)", file: file, line: line)
        let message = value["message"] as? String
        XCTAssertFalse(message?.isEmpty ?? true, "a failure explains itself: \(reply)", file: file, line: line)
        // The raw reply also decodes with the protocol's own types.
        if let data = try? JSONSerialization.data(withJSONObject: reply),
            let envelope = try? ReplyEnvelope.decode(Array(data))
        {
            XCTAssertEqual(envelope.id, id, file: file, line: line)
            if case .failure(let f) = envelope.reply {
                XCTAssertEqual(f.code, code, file: file, line: line)
            } else {
                XCTFail("decoded as \(envelope.reply)", file: file, line: line)
            }
        } else {
            XCTFail("the reply does not decode as a ReplyEnvelope: \(reply)", file: file, line: line)
        }
    }

    private func expectFailure(
        _ client: RawClient,
        id: UInt64,
        code: FailureCode,
        file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        assertFailure(try client.readReply(), id: id, code: code, file: file, line: line)
    }

    private func assertClosed(_ client: RawClient, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(client.isClosed(), "the daemon must close the connection after \(what)", file: file, line: line)
    }

    /// The daemon process is alive, a new client can greet and read its status, and nothing changed.
    private func assertDaemonServes(
        _ expected: UserStatus? = nil,
        file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        let pid = enclave.processID
        XCTAssertGreaterThan(pid, 0, file: file, line: line)
        var status: Int32 = 0
        XCTAssertEqual(
            waitpid(pid, &status, WNOHANG),
            0,
            "laenclaved exited; log:\n\(enclave.log())",
            file: file,
            line: line
        )
        // A raw newcomer greets.
        let client = try raw()
        defer { client.close() }
        client.sendRequest(id: 99, op: "hello", args: ["version": enclaveProtocolVersion])
        assertKind(try client.readReply(), id: 99, kind: "hello", file: file, line: line)
        client.sendRequest(id: 100, op: "status")
        assertKind(try client.readReply(), id: 100, kind: "status", file: file, line: line)
        // The client library works, and the state is what it was.
        let now = try freshStatus()
        XCTAssertEqual(now, expected ?? baseline, "state changed", file: file, line: line)
        XCTAssertTrue(now.passcodeSet, file: file, line: line)
        let kit = try enclave.status()
        XCTAssertEqual(
            [kit.biometricFailures, kit.passcodeFailures, kit.queuedEvents],
            [now.biometricFailures, now.passcodeFailures, now.queuedEvents],
            file: file,
            line: line
        )
        XCTAssertEqual(kit.enrolledCount, now.enrolledCount, file: file, line: line)
        XCTAssertEqual(kit.passcodeSet, now.passcodeSet, file: file, line: line)
        XCTAssertEqual(kit.biometryLockout, now.biometryLockout, file: file, line: line)
        XCTAssertEqual(kit.domainState, now.domainState, file: file, line: line)
    }

    /// A new client gets the (one per user) prompt and can end it: no evaluation of a vanished client
    /// still holds it. Deterministic: invalidating this context ends this evaluation, whatever the
    /// shared simulated queue holds.
    private func assertPromptIsFree(file: StaticString = #filePath, line: UInt = #line) throws {
        let client = try greeted(id: 1, file: file, line: line)
        defer { client.close() }
        var o = options()
        o["onTerminal"] = true
        client.sendRequest(id: 2, op: "evaluate", args: ["context": "probe", "policy": 1, "options": o])
        // Waiting behind a leaked prompt would end after the prompt-queue timeout (30 s) with systemCancel.
        assertKind(try client.readReply(timeout: 45), id: 2, kind: "prompt", file: file, line: line)
        client.sendRequest(id: 3, op: "invalidate", args: ["context": "probe"])
        var final: [String: Any]?
        for _ in 0..<20 {
            guard let reply = try client.readReply() else { break }
            let kind = (reply["reply"] as? [String: Any])?["kind"] as? String
            if number(reply["id"]) == 3 {
                assertKind(reply, id: 3, kind: "ok", file: file, line: line)
                continue
            }
            if kind == "evaluated" {
                final = reply
                break
            }
        }
        assertKind(final, id: 2, kind: "evaluated", file: file, line: line)
        let value = (final?["reply"] as? [String: Any])?["value"] as? [String: Any]
        XCTAssertEqual(
            number(value?["error"]),
            Int64(LAErrorCode.appCancel.rawValue),
            "\(String(describing: final))",
            file: file,
            line: line
        )
    }

    private func options(reason: Any = "Unlock the vault") -> [String: Any] {
        ["reason": reason, "reuseDuration": 0, "interactionNotAllowed": false, "onTerminal": false]
    }

    // MARK: Framing

    func testOversizedDeclaredLengthAnswersMalformedThenCloses() throws {
        for declared in [WireLimits.maxPayloadBytes + 1, 1 << 20, Int(Int32.max), Int(UInt32.max)] {
            let client = try raw()
            client.sendRaw(RawClient.header(declared) + Array("{\"id\":1,\"op\":\"hello\"".utf8))
            assertFailure(try client.readReply(), id: 0, code: .malformedMessage)
            assertClosed(client, "a frame declaring \(declared) bytes")
        }
        // Also after hello, on a connection that was in use.
        let client = try greeted()
        client.sendRaw(RawClient.header(WireLimits.maxPayloadBytes + 1))
        assertFailure(try client.readReply(), id: 0, code: .malformedMessage)
        assertClosed(client, "an oversized frame after hello")
        // The limit itself is accepted: a 64 KiB payload (JSON padded with spaces) is a request.
        let big = try greeted()
        let json = Array("{\"id\":3,\"op\":\"status\"}".utf8)
        big.sendFrame(json + [UInt8](repeating: 0x20, count: WireLimits.maxPayloadBytes - json.count))
        assertKind(try big.readReply(), id: 3, kind: "status")
        try assertDaemonServes()
    }

    func testZeroLengthFrameAnswersMalformedThenCloses() throws {
        let fresh = try raw()
        fresh.sendRaw(RawClient.header(0))
        assertFailure(try fresh.readReply(), id: 0, code: .malformedMessage)
        assertClosed(fresh, "an empty frame")

        let client = try greeted()
        client.sendRaw(RawClient.header(0) + RawClient.header(2) + Array("{}".utf8))
        assertFailure(try client.readReply(), id: 0, code: .malformedMessage)
        assertClosed(client, "an empty frame after hello")
        try assertDaemonServes()
    }

    func testTruncatedFrameThenCloseLeavesTheDaemonServing() throws {
        let hello = Array("{\"id\":1,\"op\":\"hello\",\"args\":{\"version\":1}}".utf8)
        // Header only, partial header, header + part of the payload; each followed by end of stream.
        let cuts: [[UInt8]] = [
            RawClient.header(hello.count), [0, 0], RawClient.header(hello.count) + hello.prefix(10),
        ]
        for cut in cuts {
            let client = try raw()
            XCTAssertTrue(client.sendRaw(cut))
            client.shutdownWrite()
            // Broken framing: either an explanation then the close, or just the close.
            if let reply = try client.readReply() {
                assertFailure(reply, id: 0, code: .malformedMessage)
                assertClosed(client, "a truncated frame")
            }
        }
        // A complete request followed by a truncated one: the complete one is still answered.
        let client = try raw()
        client.sendRaw(RawClient.header(hello.count) + hello + RawClient.header(100) + Array("{\"id\":2".utf8))
        client.shutdownWrite()
        assertKind(try client.readReply(), id: 1, kind: "hello")
        if let reply = try client.readReply() {
            assertFailure(reply, id: 0, code: .malformedMessage)
            assertClosed(client, "a truncated frame after hello")
        }
        try assertDaemonServes()
    }

    // MARK: Order and version

    func testRequestBeforeHelloAnswersOutOfOrder() throws {
        let client = try raw()
        client.sendRequest(id: 7, op: "status")
        try expectFailure(client, id: 7, code: .outOfOrder)
        client.sendRequest(id: 8, op: "canEvaluate", args: ["context": "c1", "policy": 1])
        try expectFailure(client, id: 8, code: .outOfOrder)
        client.sendRequest(id: 9, op: "setPasscode", args: ["new": "999999"])
        try expectFailure(client, id: 9, code: .outOfOrder)
        client.sendRequest(id: 10, op: "simulate", args: ["events": [["kind": "match"]]])
        try expectFailure(client, id: 10, code: .outOfOrder)
        client.sendRequest(id: 11, op: "removePasscode", args: ["current": "1234"])
        try expectFailure(client, id: 11, code: .outOfOrder)
        // The connection is still usable: hello, then requests work.
        client.sendRequest(id: 12, op: "hello", args: ["version": enclaveProtocolVersion])
        assertKind(try client.readReply(), id: 12, kind: "hello")
        client.sendRequest(id: 13, op: "status")
        assertKind(try client.readReply(), id: 13, kind: "status")
        try assertDaemonServes()
    }

    func testHelloWithWrongVersionAnswersUnsupportedVersionThenCloses() throws {
        for (id, version) in [(UInt64(3), 2), (4, 0), (5, -1), (6, 1_000_000)] {
            let client = try raw()
            client.sendRequest(id: id, op: "hello", args: ["version": version])
            try expectFailure(client, id: id, code: .unsupportedVersion)
            assertClosed(client, "hello version \(version)")
        }
        // Even after a good hello, a second one with a wrong version ends the connection.
        let client = try greeted()
        client.sendRequest(id: 20, op: "hello", args: ["version": 2])
        try expectFailure(client, id: 20, code: .unsupportedVersion)
        assertClosed(client, "a second hello with a wrong version")
        try assertDaemonServes()
    }

    // Bad operations and arguments inside well-formed frames (unknown operations, wrong types,
    // missing arguments, policies, text and passcode limits, the event queue's bound, prompt input
    // without an evaluation) are answered by the connection handler alone: they are tested in
    // process, in EnclaveServerTests/ConnectionHandlerTests.

    // MARK: Garbage and abuse

    func testGarbageBinaryBytesGetMalformedOrCloseAndNothingElse() throws {
        var rng = SplitMix64(seed: 0x5eed_1a_e0c1a5e)
        func garbage(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) } }

        // Garbage whose first 4 bytes declare an absurd length: broken framing.
        for _ in 0..<5 {
            let client = try raw()
            let bytes = [0xde, 0xad, 0xbe, 0xef] + garbage(4096)
            client.sendRaw(bytes)
            assertFailure(try client.readReply(), id: 0, code: .malformedMessage)
            assertClosed(client, "garbage")
        }
        // Garbage inside correctly sized frames: each answered, the connection goes on.
        let client = try raw()
        for size in [1, 3, 17, 512, 4096, WireLimits.maxPayloadBytes] {
            client.sendFrame(garbage(size))
            assertFailure(try client.readReply(), id: 0, code: .malformedMessage)
        }
        client.sendRequest(id: 77, op: "hello", args: ["version": enclaveProtocolVersion])
        assertKind(try client.readReply(), id: 77, kind: "hello")

        // Purely random streams: whatever comes back is a malformedMessage failure, then a close.
        for _ in 0..<10 {
            let c = try raw()
            c.sendRaw(garbage(Int(rng.next() % 8192) + 1))
            var replies = 0
            while replies < 64 {
                let reply: [String: Any]?
                do { reply = try c.readReply(timeout: 0.5) } catch RawClientError.timeout { break }
                guard let reply else { break }
                assertFailure(reply, id: 0, code: .malformedMessage)
                replies += 1
            }
            c.abort()
        }
        let checked = try raw()
        let stream =
            [0x00, 0x00, 0x00, 0x05] + Array("\u{0}\u{1}\u{2}\u{3}\u{4}".utf8) + [0x00, 0x01, 0x00, 0x01]
            + garbage(65537)
        checked.sendRaw(stream)
        assertFailure(try checked.readReply(), id: 0, code: .malformedMessage)
        assertFailure(try checked.readReply(), id: 0, code: .malformedMessage)  // 65537 declared: oversized
        assertClosed(checked, "an oversized frame in a garbage stream")
        try assertDaemonServes()
    }

    func testTwoHundredConnectionsOpenedAndClosedAbruptly() async throws {
        // A long-lived, greeted client must be served throughout.
        let survivor = try greeted(id: 1)
        var id: UInt64 = 1
        for batch in 0..<10 {
            var clients: [RawClient] = []
            for i in 0..<20 {
                let c = try raw()
                switch (batch * 20 + i) % 4 {
                case 0: break  // nothing at all
                case 1: c.sendRequest(id: 1, op: "hello", args: ["version": 1])  // hello, never read
                case 2: c.sendRaw(RawClient.header(40) + Array("{\"id\":".utf8))  // half a frame
                default: c.sendRequest(id: 1, op: "status")  // out of order, never read
                }
                clients.append(c)
            }
            for (i, c) in clients.enumerated() { i % 2 == 0 ? c.abort() : c.close() }
            id += 1
            survivor.sendRequest(id: id, op: "status")
            assertKind(try survivor.readReply(), id: id, kind: "status")
        }
        // Evaluations started on connections that vanish do not wedge the prompt for others.
        for _ in 0..<3 {
            let c = try greeted(id: 1)
            c.sendRequest(id: 2, op: "evaluate", args: ["context": "x", "policy": 1, "options": options()])
            c.abort()
        }
        // The daemon reads a vanished client's last frames before it sees the end: wait until it
        // has answered all three (appCancel), or a late one could take the touch queued below.
        try eventually("the three orphaned evaluations ended", timeout: 30) {
            guard case .audit(let entries) = try enclave.send(.audit(.init(limit: 50, everyApp: false))) else {
                return false
            }
            return entries.filter { $0.operation == "evaluate" && $0.result.hasPrefix("appCancel") }.count >= 3
        }
        try assertPromptIsFree()
        try enclave.queue(.match)
        try await enclave.run {
            let ok = try await LAContext().evaluatePolicy(
                .deviceOwnerAuthenticationWithBiometrics,
                localizedReason: "After the storm"
            )
            XCTAssertTrue(ok)
        }
        try assertDaemonServes()
    }

    /// Attack: a client asks for large answers (each near the 64 KiB message limit) and stops
    /// reading. Its unwritten replies are bounded in bytes, not only in number: past 1 MiB the
    /// daemon closes the connection instead of holding 40 × 64 KiB (or, before, 256 of them).
    func testAClientThatStopsReadingLargeAnswersIsClosed() throws {
        let secret = Data(repeating: 0x5A, count: 45_000)
        try enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "large",
                        kSecValueData as String: secret,
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        let client = try greeted()
        let query = KeychainRequest(
            attributes: ["class": .string("genp"), "acct": .string("large")],
            context: "big",
            returnData: true
        )
        for id in UInt64(100)..<140 {
            XCTAssertTrue(client.sendFrame(RequestEnvelope(id: id, request: .keychainCopy(query)).encoded()))
        }
        Thread.sleep(forTimeInterval: 1)
        var answered = 0
        while answered < 40, let reply = try client.readReply(timeout: 10) {
            assertKind(reply, id: 100 + UInt64(answered), kind: "keychain")
            answered += 1
        }
        XCTAssertLessThan(answered, 40, "the daemon closed the connection once its unwritten replies passed 1 MiB")
        XCTAssertTrue(client.isClosed(timeout: 5))
        try assertDaemonServes()
    }

    func testClientSendingHalfAFrameAndVanishing() async throws {
        let bystander = try greeted(id: 1)
        let hello = Array("{\"id\":1,\"op\":\"hello\",\"args\":{\"version\":1}}".utf8)
        for cut in [1, 2, 3, 4, 5, hello.count / 2, hello.count + 3] {
            let c = try raw()
            c.sendRaw(Array((RawClient.header(hello.count) + hello).prefix(cut)))
            c.abort()
        }
        // Half a frame after hello, with an evaluation running on that connection.
        let vanishing = try greeted(id: 1)
        var o = options()
        o["onTerminal"] = true
        vanishing.sendRequest(id: 2, op: "evaluate", args: ["context": "v", "policy": 2, "options": o])
        assertKind(try vanishing.readReply(), id: 2, kind: "prompt")
        let request = Array(
            "{\"id\":3,\"op\":\"simulate\",\"args\":{\"events\":[{\"kind\":\"passcode\",\"passcode\":\"0000\"}]}}".utf8
        )
        vanishing.sendRaw(RawClient.header(request.count) + request.prefix(request.count / 2))
        vanishing.abort()

        bystander.sendRequest(id: 2, op: "status")
        assertKind(try bystander.readReply(), id: 2, kind: "status")
        // The half-sent wrong passcode was never an attempt, and the prompt is free again.
        try assertPromptIsFree()
        try enclave.queue(.match)
        try await enclave.run {
            let ok = try await LAContext().evaluatePolicy(
                .deviceOwnerAuthenticationWithBiometrics,
                localizedReason: "Still here"
            )
            XCTAssertTrue(ok)
        }
        try assertDaemonServes()
    }
}

/// A small deterministic generator so that garbage is the same on every run.
private struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
