import EnclaveCore
import EnclaveProtocol
@testable import EnclaveServer
import Foundation
import Logging
import XCTest

/// The daemon's core driven in-process: a real `EnclaveDaemon` (its storage in a temporary
/// directory, a manual clock, a simulated Touch ID) and one `ConnectionHandler` whose replies go
/// to a recording sink. No socket, no process: what only processes show stays in the process-level targets (DaemonProcessTests, AppleAPITests, TouchLoginEndToEndTests).
final class ConnectionHandlerTests: XCTestCase {
    /// Replies as the handler sends them, awaitable by request id.
    actor RecordingReplySink: ReplySink {
        private(set) var replies: [ReplyEnvelope] = []
        func send(_ envelope: ReplyEnvelope) async { replies.append(envelope) }

        /// The final reply to `id`, waiting for it up to `timeout` seconds.
        func final(_ id: UInt64, timeout: Double = 5) async throws -> Reply {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if let r = replies.first(where: { $0.id == id && $0.reply.isFinal }) { return r.reply }
                try await Task.sleep(nanoseconds: 1_000_000)
            }
            throw Failure(.internalError, "no final reply to \(id) within \(timeout) s; got \(replies)")
        }
    }

    private var directory: String!
    private var daemon: EnclaveDaemon!
    private var sink: RecordingReplySink!
    private var handler: ConnectionHandler!
    private var nextID: UInt64 = 1
    private let app = "/usr/bin/example-app"

    override func setUp() async throws {
        directory = NSTemporaryDirectory() + "connection-handler-\(UUID().uuidString)"
        var config = DaemonConfiguration(mode: .user, socketPath: directory + "/socket", stateDirectory: directory + "/state",
                                         masterKeyPath: directory + "/keys/master.key", simulatedSensor: .touchID, simulationEnabled: true)
        config.passcodeCost = 10
        daemon = try EnclaveDaemon(config: config, clock: ManualClock(), logger: Logger(label: "test"))
        sink = RecordingReplySink()
        handler = ConnectionHandler(peer: PeerIdentity(uid: getuid(), gid: getgid(), pid: getpid(), app: app), daemon: daemon, sink: sink,
                                    logger: Logger(label: "test"))
        _ = try await request(.hello(version: enclaveProtocolVersion))
        _ = try await request(.setPasscode(current: nil, new: "1234"))
        _ = try await request(.enroll(passcode: "1234", name: "right thumb"))
    }

    override func tearDown() async throws {
        handler.closed()
        handler = nil
        daemon = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    @discardableResult
    private func request(_ r: Request) async throws -> Reply {
        let id = nextID
        nextID += 1
        let open = await handler.receive(RequestEnvelope(id: id, request: r).encoded())
        XCTAssertTrue(open)
        return try await sink.final(id)
    }

    private func keychain(_ op: KeychainOperation, _ k: KeychainRequest) async throws -> KeychainReply {
        guard case .keychain(let reply) = try await request(.keychain(op, k)) else { throw Failure(.internalError, "not a keychain reply") }
        return reply
    }

    private func audit() async throws -> [AuditEntry] {
        guard case .audit(let entries) = try await request(.audit(limit: 100, passcode: nil)) else { return [] }
        return entries
    }

    func testTheFirstRequestMustBeHello() async throws {
        let fresh = ConnectionHandler(peer: PeerIdentity(uid: getuid(), gid: getgid(), pid: getpid(), app: app), daemon: daemon, sink: sink,
                                      logger: Logger(label: "test"))
        let open = await fresh.receive(RequestEnvelope(id: 900, request: .status).encoded())
        XCTAssertTrue(open)
        guard case .failure(let f) = try await sink.final(900) else { return XCTFail() }
        XCTAssertEqual(f.code, .outOfOrder)
    }

    func testAProtectedItemOpensOnlyAfterAMatchOnTheRequestsContext() async throws {
        let secret = Data("s3cret".utf8)
        let add = try await keychain(.add, KeychainRequest(attributes: ["class": .string("genp"), "acct": .string("a"), "v_Data": .data(secret)],
                                                            accessControl: AccessControlValue(protection: .whenUnlockedThisDeviceOnly, flags: .biometryCurrentSet),
                                                            context: "add"))
        XCTAssertEqual(add.status, .success)
        let query = KeychainRequest(attributes: ["class": .string("genp"), "acct": .string("a")], context: "read", reason: "Read", returnData: true)
        _ = try await request(.simulate(events: [SimulatedEvent(.nomatch), SimulatedEvent(.cancel)]))
        let cancelled = try await keychain(.copy, query)
        XCTAssertEqual(cancelled.status, .userCanceled, "a cancelled prompt maps to errSecUserCanceled")
        _ = try await request(.simulate(events: [SimulatedEvent(.match)]))
        let read = try await keychain(.copy, query)
        XCTAssertEqual(read.status, .success)
        XCTAssertEqual(read.items.first?.data, secret)
        let steps = try await audit().filter { $0.operation == "keychain.authorize" }.map(\.result)
        XCTAssertEqual(steps.sorted(), ["success(biometric)", "userCancel(-2)"])
    }

    func testAnEnrolmentChangeInvalidatesACurrentSetItemForGood() async throws {
        _ = try await keychain(.add, KeychainRequest(attributes: ["class": .string("genp"), "acct": .string("b"), "v_Data": .data(Data([1]))],
                                                      accessControl: AccessControlValue(protection: .whenUnlocked, flags: .biometryCurrentSet),
                                                      context: "add"))
        _ = try await request(.enroll(passcode: "1234", name: "left thumb"))
        _ = try await request(.simulate(events: [SimulatedEvent(.match)]))
        let read = try await keychain(.copy, KeychainRequest(attributes: ["class": .string("genp"), "acct": .string("b")], context: "r", returnData: true))
        XCTAssertEqual(read.status, .invalidItemRef)
        guard case .status(let status) = try await request(.status) else { return XCTFail() }
        XCTAssertEqual(status.queuedEvents, 1, "no prompt was opened: the touch is still queued")
    }

    func testAMatchSavesTheRecordAndItsAuditEntryTogether() async throws {
        _ = try await request(.simulate(events: [SimulatedEvent(.match)]))
        guard case .evaluated(let result) = try await request(.evaluate(context: "e", policy: 1, options: EvaluationOptions(reason: "Unlock"))) else {
            return XCTFail()
        }
        XCTAssertTrue(result.success)
        // Straight from the database, without the group commit's flush: the entry is already there.
        let stored = try daemon.storage.audit(uid: getuid(), app: app, limit: 10)
        XCTAssertEqual(stored.first?.operation, "evaluate")
        XCTAssertEqual(stored.first?.result, "success(biometric)")
        XCTAssertEqual(try daemon.storage.loadUser(getuid())?.ledger.biometricFailures, 0)
    }

    func testEvaluateAccessControlProvesEveryConstraint() async throws {
        _ = try await request(.simulate(events: [SimulatedEvent(.match), SimulatedEvent.passcode("1234")]))
        guard case .evaluated(let result) = try await request(.authorizeAccessControl(context: "ac", flags: [.biometryAny, .and, .devicePasscode],
                                                                                       options: EvaluationOptions(reason: "Sign"))) else { return XCTFail() }
        XCTAssertTrue(result.success, "\(result)")
        let steps = try await audit().filter { $0.operation == "accessControl.authorize" }.map(\.result)
        XCTAssertEqual(steps.sorted(), ["success(biometric)", "success(passcode)"])
    }

    /// Attack: two evaluations on one context, then the client goes. Every request of a closed
    /// connection ends: none keeps the user's prompt, nor eats the touch queued for the next app.
    func testAClosedConnectionLeavesNoEvaluationBehind() async throws {
        let options = EvaluationOptions(reason: "Unlock")
        for id in [UInt64(500), 501] {
            let open = await handler.receive(RequestEnvelope(id: id, request: .evaluate(context: "twice", policy: 1, options: options)).encoded())
            XCTAssertTrue(open)
        }
        guard case .evaluated(let second) = try await sink.final(501), !second.success else { return XCTFail("one evaluation per context") }
        handler.closed()
        guard case .evaluated(let orphan) = try await sink.final(500) else { return XCTFail("the first evaluation ended with its connection") }
        XCTAssertEqual(orphan.error, .appCancel)

        let next = ConnectionHandler(peer: PeerIdentity(uid: getuid(), gid: getgid(), pid: getpid(), app: "/usr/bin/next-app"), daemon: daemon,
                                     sink: sink, logger: Logger(label: "test"))
        defer { next.closed() }
        _ = await next.receive(RequestEnvelope(id: 600, request: .hello(version: enclaveProtocolVersion)).encoded())
        _ = await next.receive(RequestEnvelope(id: 601, request: .simulate(events: [SimulatedEvent(.match)])).encoded())
        _ = try await sink.final(601)
        _ = await next.receive(RequestEnvelope(id: 602, request: .evaluate(context: "n", policy: 1, options: options)).encoded())
        guard case .evaluated(let result) = try await sink.final(602) else { return XCTFail() }
        XCTAssertTrue(result.success, "the next app's evaluation got the prompt and its touch: \(result)")
    }
}
