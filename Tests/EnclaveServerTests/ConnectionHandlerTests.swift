import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import Synchronization
import XCTest

@testable import EnclaveServer

/// The daemon's core driven in-process: a real `EnclaveDaemon` (its storage in a temporary
/// directory, a manual clock, a simulated Touch ID) and one `ConnectionHandler` whose replies go
/// to a recording sink. No socket, no process: what only processes show stays in the process-level targets (DaemonProcessTests, AppleAPITests, TouchLoginEndToEndTests).
final class ConnectionHandlerTests: XCTestCase {
    /// Replies as the handler sends them, awaitable by request id: a waiter is woken by the reply
    /// it waits for, never by polling.
    final class RecordingReplySink: ReplySink {
        private struct Waiter {
            let token: UInt64
            let id: UInt64
            let matches: @Sendable (Reply) -> Bool
            /// Whether the reply it gets is taken from `replies` (the next waiter for the same
            /// kind of reply waits for the next one).
            let takes: Bool
            let continuation: CheckedContinuation<Reply, any Error>
            var timer: Task<Void, Never>?
        }
        private struct Recorded {
            var replies: [ReplyEnvelope] = []
            var waiters: [Waiter] = []
            var nextToken: UInt64 = 0

            mutating func take(_ token: UInt64) -> Waiter? {
                guard let i = waiters.firstIndex(where: { $0.token == token }) else { return nil }
                return waiters.remove(at: i)
            }
        }
        private let recorded = Mutex(Recorded())

        func send(_ envelope: ReplyEnvelope) {
            // Every waiter it matches is woken, up to the first that takes it.
            let woken = recorded.withLock { recorded -> [Waiter] in
                recorded.replies.append(envelope)
                var woken: [Waiter] = []
                for waiter in recorded.waiters where waiter.id == envelope.id && waiter.matches(envelope.reply) {
                    woken.append(waiter)
                    if waiter.takes {
                        recorded.replies.removeLast()
                        break
                    }
                }
                for waiter in woken { _ = recorded.take(waiter.token) }
                return woken
            }
            for waiter in woken {
                waiter.timer?.cancel()
                waiter.continuation.resume(returning: envelope.reply)
            }
        }

        /// The first reply to `id` that `matches`, waiting for it up to `timeout` seconds.
        func reply(
            _ id: UInt64,
            takes: Bool,
            timeout: Double = 5,
            matching matches: @escaping @Sendable (Reply) -> Bool
        ) async throws -> Reply {
            try await withCheckedThrowingContinuation { continuation in
                let found = recorded.withLock { recorded -> Reply? in
                    if let i = recorded.replies.firstIndex(where: { $0.id == id && matches($0.reply) }) {
                        return takes ? recorded.replies.remove(at: i).reply : recorded.replies[i].reply
                    }
                    recorded.nextToken += 1
                    let token = recorded.nextToken
                    let timer = Task { [weak self] in
                        guard (try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9))) != nil else { return }
                        self?.expire(token, id: id, timeout: timeout)
                    }
                    recorded.waiters.append(
                        Waiter(
                            token: token,
                            id: id,
                            matches: matches,
                            takes: takes,
                            continuation: continuation,
                            timer: timer
                        )
                    )
                    return nil
                }
                if let found { continuation.resume(returning: found) }
            }
        }

        private func expire(_ token: UInt64, id: UInt64, timeout: Double) {
            let (expired, replies) = recorded.withLock { ($0.take(token), $0.replies) }
            expired?.continuation.resume(
                throwing: Failure(.internalError, "no such reply to \(id) within \(timeout) s; got \(replies)")
            )
        }

        /// The final reply to `id`, waiting for it up to `timeout` seconds; taken, so the next call
        /// for the same id (id 0: a message that had none) waits for the next such reply.
        func final(_ id: UInt64, timeout: Double = 5) async throws -> Reply {
            try await reply(id, takes: true, timeout: timeout) { $0.isFinal }
        }

        /// Waits until a prompt screen was sent for `id` (left in `replies`).
        func waitForPrompt(_ id: UInt64, timeout: Double = 5) async throws {
            _ = try await reply(id, takes: false, timeout: timeout) { !$0.isFinal }
        }

        /// The replies sent and not taken, in order.
        var replies: [ReplyEnvelope] { recorded.withLock { $0.replies } }

        /// Removes and returns the reply at `index` of `replies`.
        func takeReply(at index: Int) -> Reply { recorded.withLock { $0.replies.remove(at: index).reply } }

        /// Whether a prompt screen was sent for `id`.
        func sawPrompt(_ id: UInt64) -> Bool { replies.contains { $0.id == id && !$0.reply.isFinal } }
        func hasFinal(_ id: UInt64) -> Bool { replies.contains { $0.id == id && $0.reply.isFinal } }
    }

    private var directory: String!
    private var daemon: EnclaveDaemon!
    private var sink: RecordingReplySink!
    private var handler: ConnectionHandler!
    private var nextID: UInt64 = 1
    private let jobs = ConnectionJobs()
    private var handlers: [ConnectionHandler] = []
    private let app = "/usr/bin/example-app"

    override func setUp() async throws {
        directory = NSTemporaryDirectory() + "connection-handler-\(UUID().uuidString)"
        daemon = try EnclaveDaemon(config: .inProcess(directory), clock: ManualClock(), logger: Logger(label: "test"))
        // The test plays the handoff socket (`EnclaveDaemon.handOver`).
        daemon.handoff.serve(.everyone)
        sink = RecordingReplySink()
        handler = connect(app)
        _ = try await request(.hello(.init(version: enclaveProtocolVersion)))
        _ = try await administer(.setPasscode, secrets: ["1234"])
        _ = try await administer(.enroll(.init(name: "right thumb")), secrets: ["1234"])
    }

    override func tearDown() async throws {
        handler.closed()
        for handler in handlers { handler.closed() }
        // Closing a connection ends every request it started.
        await jobs.finished()
        handler = nil
        daemon = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A handler for a new connection of `app`, its requests running as they would on a socket.
    private func connect(_ app: String, kind: AppIdentity.Kind = .app) -> ConnectionHandler {
        let handler = ConnectionHandler(
            peer: PeerIdentity(
                uid: getuid(),
                gid: getgid(),
                pid: getpid(),
                identity: AppIdentity(name: app, kind: kind)
            ),
            daemon: daemon,
            sink: sink,
            logger: Logger(label: "test")
        )
        handlers.append(handler)
        return handler
    }

    /// Another app connects, queues a touch and evaluates: it gets the user's prompt and the touch.
    private func assertTheNextAppGetsThePromptAndItsTouch(
        ids first: UInt64,
        file: StaticString = #filePath,
        line: UInt = #line
    ) async throws {
        let next = connect("/usr/bin/next-app")
        defer { next.closed() }
        _ = await jobs.receive(
            on: next,
            RequestEnvelope(id: first, request: .hello(.init(version: enclaveProtocolVersion))).encoded()
        )
        _ = await jobs.receive(
            on: next,
            RequestEnvelope(id: first + 1, request: .simulate(.init(events: [SimulatedEvent(.match)]))).encoded()
        )
        _ = try await sink.final(first + 1)
        _ = await jobs.receive(
            on: next,
            RequestEnvelope(
                id: first + 2,
                request: .evaluate(.init(context: "n", policy: 1, options: EvaluationOptions(reason: "Unlock")))
            ).encoded()
        )
        guard case .evaluated(let result) = try await sink.final(first + 2) else {
            return XCTFail("no evaluation", file: file, line: line)
        }
        XCTAssertTrue(result.success, "the next app got the prompt and its touch: \(result)", file: file, line: line)
    }

    @discardableResult
    private func request(_ r: Request) async throws -> Reply {
        let id = nextID
        nextID += 1
        let open = await jobs.receive(on: handler, RequestEnvelope(id: id, request: r).encoded())
        XCTAssertTrue(open)
        return try await sink.final(id)
    }

    /// Hands the connection a pipe holding `secrets` (one per line), as the handoff socket would —
    /// the ticket redeemed here by this process, which asked for it — then sends `r`.
    @discardableResult
    private func administer(_ r: Request, secrets: [String]) async throws -> Reply {
        try await handSecrets(secrets)
        return try await request(r)
    }

    private func handSecrets(_ secrets: [String]) async throws {
        guard case .handoffTicket(let ticket) = try await request(.handoff(.init(kind: .secretInput))) else {
            throw Failure(.internalError, "no ticket")
        }
        try daemon.handOver(secrets: secrets, ticket: ticket)
    }

    private func keychain(_ op: KeychainOperation, _ k: KeychainRequest) async throws -> KeychainReply {
        guard case .keychain(let reply) = try await request(.keychain(op, k)) else {
            throw Failure(.internalError, "not a keychain reply")
        }
        return reply
    }

    private func audit() async throws -> [AuditEntry] {
        guard case .audit(let entries) = try await request(.audit(.init(limit: 100, everyApp: false))) else {
            return []
        }
        return entries
    }

    /// A user-mode daemon serving uid 4242: its own apps cannot lift the passcode counter (they are
    /// what guesses); root, visiting as `administrator:root`, can — and can ask nothing else.
    func testOnlyRootVisitingLiftsTheCounterOfAUsersDaemon() async throws {
        let dir = NSTemporaryDirectory() + "served-user-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let served = try EnclaveDaemon(
            config: .inProcess(dir),
            clock: ManualClock(),
            servedUser: 4242,
            logger: Logger(label: "test")
        )
        served.handoff.serve(.everyone)
        let sink = RecordingReplySink()
        var id: UInt64 = 1000
        func ask(_ handler: ConnectionHandler, _ request: Request) async throws -> Reply {
            id += 1
            _ = await jobs.receive(on: handler, RequestEnvelope(id: id, request: request).encoded())
            return try await sink.final(id)
        }
        let app = ConnectionHandler(
            peer: PeerIdentity(uid: 4242, gid: 4242, pid: 1, identity: AppIdentity(name: self.app, kind: .app)),
            daemon: served,
            sink: sink,
            logger: Logger(label: "test")
        )
        let root = ConnectionHandler(
            peer: PeerIdentity(uid: 0, gid: 0, pid: 2, identity: .administrator),
            daemon: served,
            sink: sink,
            logger: Logger(label: "test")
        )
        // Requests that wait for the person run as the connection's jobs.
        defer {
            app.closed()
            root.closed()
        }
        for handler in [app, root] { _ = try await ask(handler, .hello(.init(version: enclaveProtocolVersion))) }
        // The app on its own: only the person, with the login password, may (nobody to ask here).
        guard case .failure(let refused) = try await ask(app, .resetPasscodeLockout(.init(uid: nil))) else {
            return XCTFail("an app lifted the counter")
        }
        XCTAssertEqual(refused, PersonSecrets.nobodyToAsk.failure)
        guard case .ok = try await ask(root, .resetPasscodeLockout(.init(uid: nil))) else {
            return XCTFail("root could not lift the counter")
        }
        guard case .failure(let other) = try await ask(root, .resetPasscodeLockout(.init(uid: 1000))) else {
            return XCTFail("root reached another user here")
        }
        XCTAssertEqual(other.code, .notPermitted)
        for request: Request in [
            .status, .audit(.init(limit: 5, everyApp: false)), .remoteLock(.init(uid: nil)),
            .simulate(.init(events: [SimulatedEvent(.match)])),
        ] {
            guard case .failure(let f) = try await ask(root, request) else {
                return XCTFail("root was served \(request.operation)")
            }
            XCTAssertEqual(f, AdminPolicy.administratorRefusal)
        }
    }

    // MARK: Bad input, as raw JSON payloads (behavior.md §7): a clear answer, nothing changed

    /// Sends one payload as the socket layer would hand it over.
    @discardableResult
    private func receive(_ payload: [UInt8], on target: ConnectionHandler? = nil) async -> Bool {
        await jobs.receive(on: target ?? handler, payload)
    }

    private func receive(json object: Any, on target: ConnectionHandler? = nil) async {
        let open = await receive(
            Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])),
            on: target
        )
        XCTAssertTrue(open, "the connection stays open after \(object)")
    }

    /// `{"id": id, "op": op, "args": args}`, args left out when nil.
    private func send(_ id: UInt64, _ op: String, _ args: Any? = nil, on target: ConnectionHandler? = nil) async {
        var object: [String: Any] = ["id": Int(id), "op": op]
        if let args { object["args"] = args }
        await receive(json: object, on: target)
    }

    private func expectFailure(
        _ id: UInt64,
        _ code: FailureCode,
        file: StaticString = #filePath,
        line: UInt = #line
    ) async throws {
        guard case .failure(let f) = try await sink.final(id) else {
            return XCTFail("\(id): not a failure", file: file, line: line)
        }
        XCTAssertEqual(f.code, code, "\(id): \(f.message)", file: file, line: line)
        XCTAssertFalse(f.message.isEmpty, "a failure explains itself", file: file, line: line)
    }

    private func expectKind(
        _ id: UInt64,
        _ operation: String,
        file: StaticString = #filePath,
        line: UInt = #line
    ) async throws {
        let reply = try await sink.final(id)
        if case .failure(let f) = reply { return XCTFail("\(id): \(f)", file: file, line: line) }
        XCTAssertTrue("\(reply)".hasPrefix(operation), "\(id): \(reply)", file: file, line: line)
    }

    private func options(reason: Any = "Unlock the vault") -> [String: Any] {
        ["reason": reason, "reuseDuration": 0, "interactionNotAllowed": false, "onTerminal": false]
    }

    /// Nothing a refused request could have changed did change.
    private func assertNothingChanged(file: StaticString = #filePath, line: UInt = #line) async throws {
        guard case .status(let status) = try await request(.status) else {
            return XCTFail("no status", file: file, line: line)
        }
        XCTAssertEqual(status.biometricFailures, 0, file: file, line: line)
        XCTAssertEqual(status.passcodeFailures, 0, file: file, line: line)
        XCTAssertEqual(status.enrolledCount, 1, file: file, line: line)
        guard case .enrolments(let names) = try await administer(.enrolments, secrets: ["1234"]) else {
            return XCTFail("no names", file: file, line: line)
        }
        XCTAssertEqual(names, ["right thumb"], file: file, line: line)
        XCTAssertTrue(status.passcodeSet, file: file, line: line)
        XCTAssertFalse(status.promptOpen, file: file, line: line)
    }

    func testMalformedJSONAnswersMalformedAndKeepsTheConnection() async throws {
        let payloads = [
            "{not json", "{\"id\": 1, \"op\": \"hello\"", "[1, 2, 3]", "\"hello\"", "42", "null", "{}",
            "{\"op\": \"hello\", \"args\": {\"version\": 1}}",  // no id
            "{\"id\": \"1\", \"op\": \"hello\"}",  // id as a string
            "{\"id\": -1, \"op\": \"hello\"}",  // id not a UInt64
            "{\"id\": 1, \"op\": 7}",  // op as a number
            "{\"id\": 1}",  // no op
            "\u{FEFF}garbage",
        ]
        for payload in payloads {
            let open = await receive(Array(payload.utf8))
            XCTAssertTrue(open)
            try await expectFailure(0, .malformedMessage)
        }
        // Invalid UTF-8.
        let open = await receive([0x7b, 0xff, 0xfe, 0x22, 0xc3, 0x28, 0x7d])
        XCTAssertTrue(open)
        try await expectFailure(0, .malformedMessage)
        // Still the same, usable connection.
        await send(5, "hello", ["version": enclaveProtocolVersion])
        try await expectKind(5, "hello")
        await receive(Array("{oops".utf8))
        try await expectFailure(0, .malformedMessage)
        await send(6, "status")
        try await expectKind(6, "status")
        try await assertNothingChanged()
    }

    func testUnknownOperationAnswersWithTheRequestsID() async throws {
        for (id, op) in [
            (UInt64(42), "frobnicate"), (43, ""), (44, "Status"), (45, "hello "),
            (46, String(repeating: "x", count: 5000)),
            (UInt64(1) << 62, "evaluatePolicy"),
        ] {
            await send(id, op, ["context": "c1"])
            try await expectFailure(id, .unknownOperation)
        }
        await send(47, "status")
        try await expectKind(47, "status")
    }

    func testWrongArgumentTypesAnswerInvalidParameter() async throws {
        let cases: [(UInt64, String, Any)] = [
            (10, "canEvaluate", ["context": "c1", "policy": "1"]),
            (11, "canEvaluate", ["context": 5, "policy": 1]),
            (12, "canEvaluate", ["context": "c1", "policy": 1.5]),
            (13, "canEvaluate", ["context": "c1", "policy": true]),
            (14, "canEvaluate", ["context": "c1", "policy": NSNull()]),
            (15, "evaluate", ["context": "c1", "policy": 1, "options": "Unlock"]),
            (16, "evaluate", ["context": "c1", "policy": 1, "options": options(reason: 7)]),
            (17, "setPasscode", "1234"),
            (18, "handoff", ["kind": "explode"]),
            (19, "simulate", ["events": ["match"]]),
            (20, "simulate", ["events": [["kind": "lick"]]]),
            (21, "simulate", ["events": ["kind": "match"]]),
            (22, "audit", ["limit": "all"]),
            (23, "remoteLock", ["uid": -1]),
            (24, "canEvaluate", ["c1", 1]),
            (25, "status", "please"),
            (26, "canEvaluate", ["context": "c1", "policy": 1e30]),
        ]
        for (id, op, args) in cases {
            await send(id, op, args)
            try await expectFailure(id, .invalidParameter)
        }
        // An empty or overlong context id is a bad parameter too.
        await send(30, "canEvaluate", ["context": "", "policy": 1])
        try await expectFailure(30, .invalidParameter)
        await send(31, "canEvaluate", ["context": String(repeating: "c", count: 65), "policy": 1])
        try await expectFailure(31, .invalidParameter)
        await send(32, "status")
        try await expectKind(32, "status")
        try await assertNothingChanged()
    }

    func testMissingRequiredArgumentsAnswerInvalidParameter() async throws {
        let unGreeted = connect(app)
        defer { unGreeted.closed() }
        await send(1001, "hello", on: unGreeted)
        try await expectFailure(1001, .invalidParameter)
        await send(1002, "hello", [String: Any](), on: unGreeted)
        try await expectFailure(1002, .invalidParameter)
        await send(1003, "hello", ["version": enclaveProtocolVersion], on: unGreeted)
        try await expectKind(1003, "hello")

        let cases: [(UInt64, String, [String: Any]?)] = [
            (10, "canEvaluate", nil),
            (11, "canEvaluate", ["context": "c1"]),
            (12, "canEvaluate", ["policy": 1]),
            (13, "evaluate", ["context": "c1", "policy": 1]),
            (14, "evaluate", ["context": "c1", "options": options()]),
            (15, "evaluate", ["context": "c1", "policy": 1, "options": ["reason": "Unlock"]]),
            (16, "handoff", [:]),
            (17, "handoff", nil),
            (18, "invalidate", [:]),
            (19, "keychainRemove", [:]),
            (20, "configureAccessGroup", ["name": "g"]),
            (21, "enroll", ["passcode": "1234"]),
            (22, "enroll", ["name": "left-thumb"]),
            (23, "unenroll", ["passcode": "1234"]),
            (24, "simulate", [:]),
            (25, "simulate", ["events": [["passcode": "1234"]]]),
        ]
        for (id, op, args) in cases {
            await send(id, op, args)
            try await expectFailure(id, .invalidParameter)
        }
        // No request carries the person's keys: the app's own prompt input is gone.
        await send(26, "promptInput", ["context": "c1", "action": "passcode", "passcode": "1234"])
        try await expectFailure(26, .unknownOperation)
        await send(27, "status")
        try await expectKind(27, "status")
        try await assertNothingChanged()
    }

    func testBadPolicyValuesAnswerInvalidParameter() async throws {
        var id: UInt64 = 100
        for policy in [0, 6, -1, 99, Int.max, Int.min] {
            id += 1
            await send(id, "canEvaluate", ["context": "c\(id)", "policy": policy])
            try await expectFailure(id, .invalidParameter)
            id += 1
            await send(id, "evaluate", ["context": "c\(id)", "policy": policy, "options": options()])
            try await expectFailure(id, .invalidParameter)
        }
        // The valid range still answers canEvaluate (not a failure).
        for policy in 1...5 {
            id += 1
            await send(id, "canEvaluate", ["context": "ok", "policy": policy])
            try await expectKind(id, "canEvaluate")
        }
        try await assertNothingChanged()
    }

    func testEmptyAndOverlongReasonAndTitlesAnswerInvalidParameter() async throws {
        let bad: [(UInt64, String)] = [
            (1, ""),
            (2, String(repeating: "a", count: WireLimits.maxTextBytes + 1)),
            (3, String(repeating: "é", count: WireLimits.maxTextBytes / 2 + 1)),  // 513 characters, 1026 bytes
            (4, String(repeating: "r", count: 60_000)),
        ]
        for (id, reason) in bad {
            for policy in [1, 2] {
                await send(
                    id * 10 + UInt64(policy),
                    "evaluate",
                    ["context": "r\(id)-\(policy)", "policy": policy, "options": options(reason: reason)]
                )
                try await expectFailure(id * 10 + UInt64(policy), .invalidParameter)
            }
        }
        var o = options()
        o["cancelTitle"] = String(repeating: "c", count: WireLimits.maxTextBytes + 1)
        await send(50, "evaluate", ["context": "t1", "policy": 1, "options": o])
        try await expectFailure(50, .invalidParameter)
        o = options()
        o["fallbackTitle"] = String(repeating: "f", count: WireLimits.maxTextBytes + 1)
        await send(51, "evaluate", ["context": "t2", "policy": 1, "options": o])
        try await expectFailure(51, .invalidParameter)
        // A rejected evaluate started nothing: no prompt was shown for any of them.
        for id: UInt64 in [11, 12, 21, 22, 31, 32, 41, 42, 50, 51] {
            let prompted = sink.sawPrompt(id)
            XCTAssertFalse(prompted, "\(id)")
        }
        guard case .status(let afterRejected) = try await request(.status) else { return XCTFail() }
        XCTAssertFalse(afterRejected.promptOpen)
        // Exactly 1024 bytes is accepted: the evaluation runs and a queued cancel ends it.
        _ = try await request(.simulate(.init(events: [SimulatedEvent(.cancel)])))
        await send(
            60,
            "evaluate",
            [
                "context": "max", "policy": 1,
                "options": options(reason: String(repeating: "m", count: WireLimits.maxTextBytes)),
            ]
        )
        guard case .evaluated(let result) = try await sink.final(60) else { return XCTFail("no evaluation") }
        XCTAssertFalse(result.success)
        XCTAssertEqual(result.error, .userCancel)
        try await assertNothingChanged()
    }

    func testOverlongPasscodeAnswersInvalidParameterAndIsNotAnAttempt() async throws {
        let long = String(repeating: "9", count: WireLimits.maxPasscodeBytes + 1)
        let longMultibyte = String(repeating: "ü", count: WireLimits.maxPasscodeBytes / 2 + 1)  // 258 bytes
        try await handSecrets(["1234", long])
        await send(1, "changePasscode")
        try await expectFailure(1, .invalidParameter)
        try await handSecrets(["1234", longMultibyte])
        await send(2, "changePasscode")
        try await expectFailure(2, .invalidParameter)
        try await handSecrets([long])
        await send(3, "setPasscode")
        try await expectFailure(3, .invalidParameter)
        // A current passcode over the limit can never be right: bad input, not a counted attempt.
        try await handSecrets([long, "567890"])
        await send(4, "changePasscode")
        try await expectFailure(4, .invalidParameter)
        await send(5, "promptInput", ["context": "c1", "action": "passcode", "passcode": long])
        try await expectFailure(5, .unknownOperation)
        await send(6, "simulate", ["events": [["kind": "passcode", "passcode": ""]]])
        try await expectFailure(6, .invalidParameter)
        await send(7, "simulate", ["events": [["kind": "passcode", "passcode": long]]])
        try await expectFailure(7, .invalidParameter)
        await send(8, "simulate", ["events": [["kind": "passcode"]]])
        try await expectFailure(8, .invalidParameter)

        // During a running evaluation too: the prompt stays, the passcode is unchanged.
        var presenting = options()
        presenting["onTerminal"] = true
        await send(9, "evaluate", ["context": "run", "policy": 2, "options": presenting])
        try await sink.waitForPrompt(9)
        let prompted = sink.sawPrompt(9)
        XCTAssertTrue(prompted, "the evaluation shows its prompt")
        await send(10, "simulate", ["events": [["kind": "passcode", "passcode": long]]])
        try await expectFailure(10, .invalidParameter)
        await send(11, "simulate", ["events": [["kind": "cancel"]]])
        try await expectKind(11, "ok")
        guard case .evaluated(let result) = try await sink.final(9) else { return XCTFail("no evaluation") }
        XCTAssertEqual(result.error, .userCancel)
        try await assertNothingChanged()
        // The passcode is still "1234": changing it with that current passcode works.
        guard case .ok = try await administer(.changePasscode, secrets: ["1234", "5678"]) else {
            return XCTFail("the passcode changed")
        }
    }

    func testSimulateWithMoreThan64EventsAnswersInvalidParameter() async throws {
        let event: [String: Any] = ["kind": "match"]
        await send(1, "simulate", ["events": Array(repeating: event, count: WireLimits.maxQueuedEvents + 1)])
        try await expectFailure(1, .invalidParameter)
        await send(2, "simulate", ["events": Array(repeating: event, count: 1_000)])
        try await expectFailure(2, .invalidParameter)
        guard case .status(let none) = try await request(.status) else { return XCTFail() }
        XCTAssertEqual(none.queuedEvents, 0, "a refused batch queues nothing")
        // 64 fit; one more does not (the limit counts what already waits).
        await send(3, "simulate", ["events": Array(repeating: event, count: WireLimits.maxQueuedEvents)])
        try await expectKind(3, "ok")
        await send(4, "simulate", ["events": [event]])
        try await expectFailure(4, .invalidParameter)
        guard case .status(let full) = try await request(.status) else { return XCTFail() }
        XCTAssertEqual(full.queuedEvents, WireLimits.maxQueuedEvents)
        await send(5, "clearSimulated")
        try await expectKind(5, "ok")
        try await assertNothingChanged()
    }

    /// The app's own prompt input is gone (the trusted prompt reads the person's keys itself): every
    /// form of it is an unknown operation, changes nothing, and counts no attempt — with no
    /// evaluation, and while one runs (which goes on waiting for the person).
    func testPromptInputIsNotARequestAnyMore() async throws {
        var id: UInt64 = 1000
        for args: [String: Any] in [
            ["context": "idle", "action": "cancel"], ["context": "idle", "action": "passcode", "passcode": "1234"],
        ] {
            id += 1
            await send(id, "promptInput", args)
            try await expectFailure(id, .unknownOperation)
        }
        id += 1
        let running = id
        await send(running, "evaluate", ["context": "run", "policy": 2, "options": options()])
        try await sink.waitForPrompt(running)
        for args: [String: Any] in [
            ["context": "run", "action": "passcode", "passcode": "1234"], ["context": "run", "action": "cancel"],
        ] {
            id += 1
            await send(id, "promptInput", args)
            try await expectFailure(id, .unknownOperation)
        }
        let finished = sink.hasFinal(running)
        XCTAssertFalse(finished, "the evaluation still waits for the person")
        id += 1
        await send(id, "invalidate", ["context": "run"])
        guard case .evaluated(let result) = try await sink.final(running) else { return XCTFail("no evaluation") }
        XCTAssertEqual(result.error, .appCancel)
        guard case .status(let status) = try await request(.status) else { return XCTFail() }
        XCTAssertEqual(status.passcodeFailures, 0)
    }

    /// Administration asks the person: with no terminal and no pipe handed, every request that
    /// reaches beyond the app is refused — a passcode the app puts in the request is not read.
    /// (Before the trusted prompt, the passcode in the request listed every app's items.)
    func testAdministrationWithoutThePersonIsRefused() async throws {
        let requests: [(String, [String: Any])] = [
            ("keychainList", ["passcode": "1234"]), ("accessGroups", ["passcode": "1234"]),
            ("configureAccessGroup", ["passcode": "1234", "name": "all", "apps": ["/usr/bin/spy"]]),
            ("keychainRemove", ["passcode": "1234", "persistentRef": Data([1]).base64EncodedString()]),
            ("audit", ["limit": 10, "everyApp": true, "passcode": "1234"]),
            ("removePasscode", ["current": "1234"]), ("changePasscode", [:]), ("setPasscode", [:]),
            ("enroll", ["passcode": "1234", "name": "spy"]), ("unenroll", ["passcode": "1234", "name": "right thumb"]),
        ]
        // A connection of its own: setUp's connection handed a pipe (now read to its end).
        let app = connect(self.app)
        var id: UInt64 = 100
        await send(id, "hello", ["version": enclaveProtocolVersion], on: app)
        try await expectKind(id, "hello")
        for (op, args) in requests {
            id += 1
            await send(id, op, args, on: app)
            try await expectFailure(id, .notPermitted)
        }
        try await assertNothingChanged()
    }

    /// Each request reads its own lines from the handed pipe, in order; a pipe that runs out is a
    /// clear error, never a wait without end.
    func testSecretsComeFromTheHandedPipeInOrder() async throws {
        try await handSecrets(["1234", "1234"])
        guard case .keychainListing = try await request(.keychainList) else { return XCTFail("first line") }
        guard case .accessGroups = try await request(.accessGroups) else { return XCTFail("second line") }
        await send(900, "keychainList")
        try await expectFailure(900, .invalidParameter)
        let wrong = try await administer(.keychainList, secrets: ["0000"])
        guard case .failure(let f) = wrong else { return XCTFail("a wrong passcode listed the items") }
        XCTAssertEqual(f.code, .passcodeIncorrect)
    }

    /// One request waiting for the person per connection: each holds a reader or a prompt, so a
    /// client cannot pile them up; the second is answered busy at once, the first goes on.
    func testOneRequestAtATimeWaitsForThePerson() async throws {
        guard case .handoffTicket(let ticket) = try await request(.handoff(.init(kind: .secretInput))) else {
            return XCTFail("no ticket")
        }
        var ends: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&ends), 0)
        defer { close(ends[1]) }
        guard case .success(let redeemed) = daemon.handoff.redeem(ticket, by: .init(uid: getuid(), pid: getpid()))
        else { return XCTFail() }
        XCTAssertTrue(redeemed.destination.receive(.secretInput, ends[0]))
        await send(700, "keychainList")
        try await Task.sleep(nanoseconds: 100_000_000)
        await send(701, "accessGroups")
        try await expectFailure(701, .busy)
        XCTAssertEqual(write(ends[1], "1234\n", 5), 5)
        guard case .keychainListing = try await sink.final(700) else { return XCTFail("the first request goes on") }
    }

    /// `handoff` answers a fresh ticket of `Handoff.ticketBytes` random bytes each time.
    func testHandoffAnswersAFreshTicket() async throws {
        await send(1, "handoff", ["kind": "terminal"])
        await send(2, "handoff", ["kind": "terminal"])
        guard case .handoffTicket(let first) = try await sink.final(1),
            case .handoffTicket(let second) = try await sink.final(2)
        else {
            return XCTFail("no tickets")
        }
        XCTAssertEqual(first.count, Handoff.ticketBytes)
        XCTAssertEqual(second.count, Handoff.ticketBytes)
        XCTAssertNotEqual(first, second)
    }

    /// A daemon that serves no handoff socket issues no ticket, and says why at once: a client
    /// would otherwise connect for nothing (where systemd holds the socket, and wait for an answer
    /// nobody gives).
    func testHandoffIsRefusedSayingWhyWhenNoHandoffSocketIsServed() async throws {
        daemon.handoff.serve(.nobody(why: "handoff = never"))
        await send(1, "handoff", ["kind": "secretInput"])
        guard case .failure(let f) = try await sink.final(1) else { return XCTFail("a ticket for nothing") }
        XCTAssertEqual(f.code, .notPermitted)
        XCTAssertEqual(f.message, "this daemon takes no handoffs: handoff = never")
        daemon.handoff.serve(.everyone)
        await send(2, "handoff", ["kind": "terminal"])
        guard case .handoffTicket = try await sink.final(2) else { return XCTFail("no ticket once served") }
    }

    // MARK: Requests

    func testTheFirstRequestMustBeHello() async throws {
        let fresh = connect(app)
        let open = await jobs.receive(on: fresh, RequestEnvelope(id: 900, request: .status).encoded())
        XCTAssertTrue(open)
        guard case .failure(let f) = try await sink.final(900) else { return XCTFail() }
        XCTAssertEqual(f.code, .outOfOrder)
    }

    func testAProtectedItemOpensOnlyAfterAMatchOnTheRequestsContext() async throws {
        let secret = Data("s3cret".utf8)
        let add = try await keychain(
            .add,
            KeychainRequest(
                attributes: ["class": .string("genp"), "acct": .string("a"), "v_Data": .data(secret)],
                accessControl: AccessControlValue(protection: .whenUnlockedThisDeviceOnly, flags: .biometryCurrentSet),
                context: "add"
            )
        )
        XCTAssertEqual(add.status, .success)
        let query = KeychainRequest(
            attributes: ["class": .string("genp"), "acct": .string("a")],
            context: "read",
            reason: "Read",
            returnData: true
        )
        _ = try await request(.simulate(.init(events: [SimulatedEvent(.nomatch), SimulatedEvent(.cancel)])))
        let cancelled = try await keychain(.copy, query)
        XCTAssertEqual(cancelled.status, .userCanceled, "a cancelled prompt maps to errSecUserCanceled")
        _ = try await request(.simulate(.init(events: [SimulatedEvent(.match)])))
        let read = try await keychain(.copy, query)
        XCTAssertEqual(read.status, .success)
        XCTAssertEqual(read.items.first?.data, secret)
        let steps = try await audit().filter { $0.operation == "keychain.authorize" }.map(\.result)
        XCTAssertEqual(steps.sorted(), ["success(biometric)", "userCancel(-2)"])
    }

    /// An interpreter is one identity for every script it runs: it keeps no secrets of its own, only
    /// in a group the person put it in (and names).
    func testAnInterpreterKeepsSecretsOnlyInAGroupThePersonPutItIn() async throws {
        let python = "/usr/bin/python3.11"
        handler.closed()
        handler = connect(python, kind: .interpreter)
        _ = try await request(.hello(.init(version: enclaveProtocolVersion)))
        let item: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string("script"), "v_Data": .data(Data("token".utf8)),
        ]
        let own = try await keychain(.add, KeychainRequest(attributes: item, context: "k"))
        XCTAssertEqual(own.status, .missingEntitlement, own.message ?? "")
        XCTAssertTrue(own.message?.contains("lactl keychain share") ?? false, own.message ?? "")
        guard case .key(let key) = try await request(.key(KeyRequest(operation: .create, kind: .signing, context: "k")))
        else { return XCTFail("no key reply") }
        XCTAssertEqual(key.problem, .notAvailable, key.message ?? "")
        XCTAssertNil(key.blob)

        _ = try await administer(.configureAccessGroup(.init(name: "scripts", apps: [python])), secrets: ["1234"])
        var grouped = item
        grouped["agrp"] = .string("scripts")
        let added = try await keychain(.add, KeychainRequest(attributes: grouped, context: "k"))
        XCTAssertEqual(added.status, .success, added.message ?? "")
        let read = try await keychain(
            .copy,
            KeychainRequest(
                attributes: ["class": .string("genp"), "svce": .string("script")],
                context: "k",
                returnData: true
            )
        )
        XCTAssertEqual(read.items.first?.data, Data("token".utf8), "the group is searched without naming it")
        // The interpreter's path is no group name, so no app can claim its place either.
        guard
            case .failure(let refused) = try await administer(
                .configureAccessGroup(.init(name: AppIdentity.unverifiedPrefix + "1:2:/x", apps: [python])),
                secrets: ["1234"]
            )
        else {
            return XCTFail("a group named like an identity was accepted")
        }
        XCTAssertEqual(refused.code, .invalidParameter)
    }

    func testAnEnrolmentChangeInvalidatesACurrentSetItemForGood() async throws {
        _ = try await keychain(
            .add,
            KeychainRequest(
                attributes: ["class": .string("genp"), "acct": .string("b"), "v_Data": .data(Data([1]))],
                accessControl: AccessControlValue(protection: .whenUnlocked, flags: .biometryCurrentSet),
                context: "add"
            )
        )
        _ = try await administer(.enroll(.init(name: "left thumb")), secrets: ["1234"])
        _ = try await request(.simulate(.init(events: [SimulatedEvent(.match)])))
        let read = try await keychain(
            .copy,
            KeychainRequest(
                attributes: ["class": .string("genp"), "acct": .string("b")],
                context: "r",
                returnData: true
            )
        )
        XCTAssertEqual(read.status, .invalidItemRef)
        guard case .status(let status) = try await request(.status) else { return XCTFail() }
        XCTAssertEqual(status.queuedEvents, 1, "no prompt was opened: the touch is still queued")
    }

    /// The scripted person acts in order: a touch is read by the simulated sensor before the next
    /// press reaches the prompt, and what comes after the evaluation's end waits for the next one.
    func testAScriptReachesTheEvaluationInItsOrder() async throws {
        _ = try await request(.simulate(.init(events: [.nomatch, .cancel, .match])))
        guard
            case .evaluated(let cancelled) = try await request(
                .evaluate(.init(context: "first", policy: 1, options: EvaluationOptions(reason: "Unlock")))
            )
        else {
            return XCTFail()
        }
        XCTAssertEqual(cancelled.error, .userCancel)
        XCTAssertEqual(
            try daemon.storage.loadUser(getuid())?.ledger.biometricFailures,
            1,
            "the touch was read before the cancel"
        )
        guard case .status(let waiting) = try await request(.status) else { return XCTFail() }
        XCTAssertEqual(waiting.queuedEvents, 1, "the match waits for the next evaluation")
        guard
            case .evaluated(let matched) = try await request(
                .evaluate(.init(context: "second", policy: 1, options: EvaluationOptions(reason: "Unlock")))
            )
        else {
            return XCTFail()
        }
        XCTAssertTrue(matched.success, "\(matched)")
        guard case .status(let after) = try await request(.status) else { return XCTFail() }
        XCTAssertEqual(after.queuedEvents, 0)
    }

    func testAMatchSavesTheRecordAndItsAuditEntryTogether() async throws {
        _ = try await request(.simulate(.init(events: [SimulatedEvent(.match)])))
        guard
            case .evaluated(let result) = try await request(
                .evaluate(.init(context: "e", policy: 1, options: EvaluationOptions(reason: "Unlock")))
            )
        else {
            return XCTFail()
        }
        XCTAssertTrue(result.success)
        // Straight from the database, without the group commit's flush: the entry is already there.
        let stored = try daemon.storage.audit(uid: getuid(), app: app, limit: 10).first { $0.operation == "evaluate" }
        XCTAssertEqual(stored?.result, "success(biometric)")
        XCTAssertEqual(try daemon.storage.loadUser(getuid())?.ledger.biometricFailures, 0)
    }

    func testEvaluateAccessControlProvesEveryConstraint() async throws {
        _ = try await request(.simulate(.init(events: [SimulatedEvent(.match), SimulatedEvent.passcode("1234")])))
        guard
            case .evaluated(let result) = try await request(
                .authorizeAccessControl(
                    .init(
                        context: "ac",
                        flags: [.biometryAny, .and, .devicePasscode],
                        options: EvaluationOptions(reason: "Sign")
                    )
                )
            )
        else { return XCTFail() }
        XCTAssertTrue(result.success, "\(result)")
        let steps = try await audit().filter { $0.operation == "accessControl.authorize" }.map(\.result)
        XCTAssertEqual(steps.sorted(), ["success(biometric)", "success(passcode)"])
    }

    /// Attack: two evaluations on one context, then the client goes. Every request of a closed
    /// connection ends: none keeps the user's prompt, nor eats the touch queued for the next app.
    func testAClosedConnectionLeavesNoEvaluationBehind() async throws {
        let options = EvaluationOptions(reason: "Unlock")
        for id in [UInt64(500), 501] {
            let open = await jobs.receive(
                on: handler,
                RequestEnvelope(id: id, request: .evaluate(.init(context: "twice", policy: 1, options: options)))
                    .encoded()
            )
            XCTAssertTrue(open)
        }
        guard case .evaluated(let second) = try await sink.final(501), !second.success else {
            return XCTFail("one evaluation per context")
        }
        handler.closed()
        guard case .evaluated(let orphan) = try await sink.final(500) else {
            return XCTFail("the first evaluation ended with its connection")
        }
        XCTAssertEqual(orphan.error, .appCancel)

        try await assertTheNextAppGetsThePromptAndItsTouch(ids: 600)
    }

    /// Attack: a client pipelines 200 evaluations on 200 contexts and reads nothing. Each would be a
    /// task waiting for the user's one prompt; the connection runs at most `maxRunning` at once.
    func testAConnectionRunsABoundedNumberOfRequests() async throws {
        let options = EvaluationOptions(reason: "Unlock")
        for i in 0..<200 {
            _ = await jobs.receive(
                on: handler,
                RequestEnvelope(
                    id: UInt64(2000 + i),
                    request: .evaluate(.init(context: "flood-\(i)", policy: 1, options: options))
                ).encoded()
            )
        }
        let limit = ContextTable<RunningRequest>.maxRunning
        var busy = 0
        for i in limit..<200 {
            guard case .failure(let f) = try await sink.final(UInt64(2000 + i)) else { continue }
            XCTAssertEqual(f.code, .busy)
            busy += 1
        }
        XCTAssertEqual(busy, 200 - limit, "every request past the limit is answered busy at once")
        handler.closed()
        for i in 0..<limit {
            guard case .evaluated(let result) = try await sink.final(UInt64(2000 + i)) else {
                return XCTFail("request \(i)")
            }
            XCTAssertFalse(result.success)
        }
    }

    /// A read that needs nobody is answered where it arrives, as the connection reads it: it takes
    /// no place among the requests the connection runs, so a connection whose every place waits on
    /// the person still reads its plain items. A read that must prove a step needs a place.
    func testAReadThatNeedsNobodyIsAnsweredWhileEveryPlaceWaitsOnThePerson() async throws {
        let plain = try await keychain(
            .add,
            KeychainRequest(
                attributes: ["class": .string("genp"), "acct": .string("plain"), "v_Data": .data(Data("p".utf8))],
                context: "add-plain"
            )
        )
        let guarded = try await keychain(
            .add,
            KeychainRequest(
                attributes: ["class": .string("genp"), "acct": .string("guarded"), "v_Data": .data(Data("g".utf8))],
                accessControl: AccessControlValue(protection: .whenUnlockedThisDeviceOnly, flags: .biometryAny),
                context: "add-guarded"
            )
        )
        XCTAssertEqual([plain.status, guarded.status], [.success, .success])
        // A connection of its own for the rest: an add's task may hold its place a moment after
        // its answer left.
        handler = connect(app)
        _ = try await request(.hello(.init(version: enclaveProtocolVersion)))
        let limit = ContextTable<RunningRequest>.maxRunning
        let options = EvaluationOptions(reason: "Unlock")
        for i in 0..<limit {
            _ = await jobs.receive(
                on: handler,
                RequestEnvelope(
                    id: UInt64(3000 + i),
                    request: .evaluate(.init(context: "waiting-\(i)", policy: 1, options: options))
                ).encoded()
            )
        }
        func read(_ id: UInt64, _ account: String, followed: Bool = false) async throws -> Reply {
            let query = KeychainRequest(
                attributes: ["class": .string("genp"), "acct": .string(account)],
                context: "read-\(id)",
                reason: "Read",
                returnData: true
            )
            _ = await jobs.receive(
                on: handler,
                RequestEnvelope(id: id, request: .keychainCopy(query)).encoded(),
                followed: followed
            )
            let answered = sink.hasFinal(id)
            XCTAssertTrue(answered, "the read of \(account) was answered before the connection read on")
            return try await sink.final(id)
        }
        guard case .keychain(let answer) = try await read(3900, "plain") else { return XCTFail("a keychain reply") }
        XCTAssertEqual(answer.status, .success, answer.message ?? "")
        XCTAssertEqual(answer.items.first?.data, Data("p".utf8))
        guard case .failure(let refused) = try await read(3901, "guarded") else {
            return XCTFail("a read that must prove a step takes a place, and there is none")
        }
        XCTAssertEqual(refused.code, .busy)
        // A context's invalidate, whose answer nobody waits for, sent just before the next request
        // (as after every SecItem call without an LAContext), is not pipelining.
        _ = await jobs.receive(
            on: handler,
            RequestEnvelope(id: 3950, request: .invalidate(.init(context: "read-3900"))).encoded(),
            followed: true
        )
        guard case .keychain(let again) = try await read(3951, "plain") else {
            return XCTFail("still answered where it arrives")
        }
        XCTAssertEqual(again.status, .success, again.message ?? "")
        // A client that sent more behind a request is served as it pipelines from then on: each
        // read a task of its own, in order, so the next is read meanwhile; such a read takes a place.
        guard case .failure(let pipelined) = try await read(3902, "plain", followed: true) else {
            return XCTFail("a read with more behind it takes a place, and there is none")
        }
        XCTAssertEqual(pipelined.code, .busy)
        guard case .failure(let after) = try await read(3903, "plain") else {
            return XCTFail("once the client pipelined, its reads take places")
        }
        XCTAssertEqual(after.code, .busy)
        handler.closed()
        for i in 0..<limit { _ = try await sink.final(UInt64(3000 + i)) }
    }

    /// A pipelining connection's read that needs nobody is answered as a task of its own, with the
    /// item, as before reads were answered where they arrive.
    func testAPipeliningConnectionsReadIsAnsweredAsATask() async throws {
        let added = try await keychain(
            .add,
            KeychainRequest(
                attributes: ["class": .string("genp"), "acct": .string("p"), "v_Data": .data(Data("v".utf8))],
                context: "add"
            )
        )
        XCTAssertEqual(added.status, .success)
        _ = await jobs.receive(on: handler, RequestEnvelope(id: 4000, request: .status).encoded(), followed: true)
        let query = KeychainRequest(
            attributes: ["class": .string("genp"), "acct": .string("p")],
            context: "read",
            returnData: true
        )
        _ = await jobs.receive(on: handler, RequestEnvelope(id: 4001, request: .keychainCopy(query)).encoded())
        guard case .keychain(let read) = try await sink.final(4001) else { return XCTFail("a keychain reply") }
        XCTAssertEqual(read.items.first?.data, Data("v".utf8))
    }

    /// Attack: one user stores items without end (the disk every user's counters live on). At the
    /// quota the keychain answers errSecDiskFull; deleting makes room again.
    func testAUsersKeychainStopsAtItsQuota() async throws {
        handler.closed()
        var config = daemon.config
        config.keychainQuotaItems = 3
        config.keychainQuotaBytes = 4096
        config.stateDirectory = directory + "/quota-state"
        daemon = try EnclaveDaemon(config: config, clock: ManualClock(), logger: Logger(label: "test"))
        daemon.handoff.serve(.everyone)
        handler = connect(app)
        _ = try await request(.hello(.init(version: enclaveProtocolVersion)))
        func add(_ account: String, bytes: Int = 10) async throws -> KeychainReply {
            try await keychain(
                .add,
                KeychainRequest(
                    attributes: [
                        "class": .string("genp"), "svce": .string("quota"), "acct": .string(account),
                        "v_Data": .data(Data(repeating: 7, count: bytes)),
                    ],
                    context: "q"
                )
            )
        }
        for i in 0..<3 {
            let added = try await add("a\(i)")
            XCTAssertEqual(added.status, .success)
        }
        let fourth = try await add("a3")
        XCTAssertEqual(fourth.status, .diskFull, fourth.message ?? "")
        XCTAssertTrue(fourth.message?.contains("3 items") ?? false, fourth.message ?? "")
        let deleted = try await keychain(
            .delete,
            KeychainRequest(
                attributes: ["class": .string("genp"), "svce": .string("quota"), "acct": .string("a0")],
                context: "q"
            )
        )
        XCTAssertEqual(deleted.status, .success)
        let again = try await add("a3")
        XCTAssertEqual(again.status, .success, "a deletion makes room")
        // Bytes too: an update that would pass them is refused and changes nothing.
        let grow = try await keychain(
            .update,
            KeychainRequest(
                attributes: ["class": .string("genp"), "svce": .string("quota"), "acct": .string("a1")],
                changes: ["v_Data": .data(Data(repeating: 1, count: 8192))],
                context: "q"
            )
        )
        XCTAssertEqual(grow.status, .diskFull, grow.message ?? "")
        let still = try await keychain(
            .copy,
            KeychainRequest(
                attributes: ["class": .string("genp"), "svce": .string("quota"), "acct": .string("a1")],
                context: "q",
                returnData: true
            )
        )
        XCTAssertEqual(still.items.first?.data, Data(repeating: 7, count: 10))
    }

    /// A keychain read waiting on its prompt ends with its connection: it answers, lets go of the
    /// user's prompt, and the touch queued for the next app is the next app's.
    func testAKeychainReadWaitingOnItsPromptEndsWithItsConnection() async throws {
        let add = try await keychain(
            .add,
            KeychainRequest(
                attributes: ["class": .string("genp"), "acct": .string("p"), "v_Data": .data(Data("x".utf8))],
                accessControl: AccessControlValue(protection: .whenUnlockedThisDeviceOnly, flags: .biometryAny),
                context: "add"
            )
        )
        XCTAssertEqual(add.status, .success)
        let query = KeychainRequest(
            attributes: ["class": .string("genp"), "acct": .string("p")],
            context: "read",
            reason: "Read",
            returnData: true
        )
        _ = await jobs.receive(on: handler, RequestEnvelope(id: 700, request: .keychainCopy(query)).encoded())
        try await sink.waitForPrompt(700)
        let prompted = sink.sawPrompt(700)
        XCTAssertTrue(prompted, "the read waits on its prompt")
        handler.closed()
        guard case .keychain(let ended) = try await sink.final(700) else { return XCTFail("the read answered") }
        XCTAssertNotEqual(ended.status, .success)

        try await assertTheNextAppGetsThePromptAndItsTouch(ids: 710)
    }
}
