import EnclaveCore
import EnclaveProtocol
import XCTest

/// One connection's rules as a value: the hello gate, the person slot, the agent role, closing and
/// the contexts, each event answered by what the shell must do.
final class ConnectionStateMachineTests: XCTestCase {
    private typealias Machine = ConnectionStateMachine<String, String, String>
    private let t0 = MonotonicStamp(bootID: "boot", seconds: 1_000)
    private let hello = Request.hello(.init(version: enclaveProtocolVersion))

    private func greeted(administrator: Bool = false) -> Machine {
        var machine = Machine(administrator: administrator)
        XCTAssertEqual(machine.requestArrived(hello), .greet(.json))
        return machine
    }

    func testOnlyHelloIsAnsweredBeforeHello() {
        let rows: [(Request, Machine.RequestAction)] = [
            (.status, .refuse(Failure(.outOfOrder, "the first request on a connection must be hello"))),
            (.setPasscode, .refuse(Failure(.outOfOrder, "the first request on a connection must be hello"))),
            (
                .invalidate(.init(context: "a")),
                .refuse(Failure(.outOfOrder, "the first request on a connection must be hello"))
            ),
            (
                .hello(.init(version: enclaveProtocolVersion + 1)),
                .refuseAndClose(
                    Failure(
                        .unsupportedVersion,
                        "this daemon speaks protocol version \(enclaveProtocolVersion), not \(enclaveProtocolVersion + 1)"
                    )
                )
            ),
            (hello, .greet(.json)),
        ]
        for (request, expected) in rows {
            var machine = Machine()
            XCTAssertEqual(machine.requestArrived(request), expected, "\(request.operation)")
            XCTAssertEqual(
                machine.helloDeadlinePassed(),
                expected != .greet(.json),
                "the deadline closes a connection not greeted: \(request.operation)"
            )
        }
    }

    func testAfterHelloRequestsAreAnsweredAndHelloAgainIsGreeted() {
        var machine = greeted()
        XCTAssertEqual(machine.requestArrived(.status), .answer)
        XCTAssertEqual(machine.requestArrived(.canEvaluate(.init(context: "a", policy: 2))), .answer)
        XCTAssertEqual(machine.requestArrived(hello), .greet(.json))
        XCTAssertFalse(machine.helloDeadlinePassed())
    }

    /// A client is pipelining once a request came with more of its bytes behind it, for good; a
    /// context's `invalidate` (whose answer nobody waits for) sent just before the next does not count.
    func testAClientPipelinesOnceARequestCameWithMoreBehindIt() {
        let rows: [(arrivals: [(Request, followed: Bool)], pipelines: Bool)] = [
            ([(.status, false), (.canEvaluate(.init(context: "a", policy: 1)), false)], false),
            ([(.invalidate(.init(context: "a")), true), (.status, false)], false),
            ([(.status, true), (.status, false)], true),
            (
                [(.invalidate(.init(context: "a")), true), (.status, true), (.invalidate(.init(context: "b")), false)],
                true
            ),
        ]
        for row in rows {
            var machine = greeted()
            for (request, followed) in row.arrivals { _ = machine.requestArrived(request, followed: followed) }
            XCTAssertEqual(machine.pipelines, row.pipelines, "\(row.arrivals.map { ($0.0.operation, $0.followed) })")
        }
    }

    /// The first hello chooses the coding of what follows it: binary when offered (under its
    /// name now, "binary2": its first form, "binary", is answered in JSON). A later hello changes
    /// nothing, whatever it offers (replies of running requests may be on their way).
    func testTheFirstHelloChoosesTheCodingForGood() {
        let offering: [String]? = ["zstd", "binary2"]
        let rows: [(first: [String]?, second: [String]?, expected: WireEncoding)] = [
            (nil, offering, .json), (["zstd"], offering, .json), (offering, nil, .binary),
            (offering, ["zstd"], .binary), (["binary"], offering, .json),
        ]
        for row in rows {
            var machine = Machine()
            let first = Request.hello(.init(version: enclaveProtocolVersion, encodings: row.first))
            let second = Request.hello(.init(version: enclaveProtocolVersion, encodings: row.second))
            XCTAssertEqual(machine.requestArrived(first), .greet(row.expected), "\(row)")
            XCTAssertEqual(machine.requestArrived(second), .greet(row.expected), "a second hello: \(row)")
            XCTAssertEqual(machine.encoding, row.expected)
        }
    }

    func testRequestsThatNeedThePersonHoldTheConnectionsOneSlot() {
        let rows: [(Request, needsPerson: Bool)] = [
            (.setPasscode, true), (.changePasscode, true), (.removePasscode, true), (.enroll(.init(name: "f")), true),
            (.unenroll(.init(name: "f")), true), (.keychainList, true),
            (.keychainRemove(.init(persistentRef: Data([1]))), true),
            (.configureAccessGroup(.init(name: "g", apps: ["a"])), true),
            (.audit(.init(limit: 5, everyApp: true)), true),
            (.audit(.init(limit: 5, everyApp: false)), false), (.status, false),
            (.invalidate(.init(context: "a")), false),
            (.keychainCopy(KeychainRequest(attributes: [:], context: "c")), false), (.servePrompts, false),
        ]
        for (request, needsPerson) in rows {
            var machine = greeted()
            XCTAssertEqual(
                machine.requestArrived(request),
                needsPerson ? .answerWaitingForThePerson : .answer,
                "\(request.operation)"
            )
            guard needsPerson else { continue }
            XCTAssertEqual(
                machine.requestArrived(request),
                .refuse(Failure(.busy, "this connection is already waiting for the person")),
                "one at a time: \(request.operation)"
            )
            XCTAssertEqual(machine.requestArrived(.status), .answer, "what needs no person goes on meanwhile")
            machine.personRequestFinished()
            XCTAssertEqual(
                machine.requestArrived(request),
                .answerWaitingForThePerson,
                "free again: \(request.operation)"
            )
        }
    }

    func testRootOnAnotherUsersDaemonOnlyLiftsThePasscodeCounter() {
        let rows: [(Request, Machine.RequestAction)] = [
            (.resetPasscodeLockout(.init(uid: nil)), .answerWaitingForThePerson),
            (.status, .refuse(AdminPolicy.administratorRefusal)),
            (.setPasscode, .refuse(AdminPolicy.administratorRefusal)),
            (.keychainList, .refuse(AdminPolicy.administratorRefusal)),
            (
                .evaluate(.init(context: "a", policy: 2, options: EvaluationOptions(reason: "r"))),
                .refuse(AdminPolicy.administratorRefusal)
            ),
        ]
        for (request, expected) in rows {
            var machine = greeted(administrator: true)
            XCTAssertEqual(machine.requestArrived(request), expected, "\(request.operation)")
        }
        var app = greeted()
        XCTAssertEqual(app.requestArrived(.status), .answer, "the rule is root's only")
    }

    func testOneEvaluationPerContextAndWhatItProvedIsHandedOn() {
        var machine = greeted()
        XCTAssertEqual(machine.evaluationStarting(on: "a", "first"), .started(nil))
        XCTAssertEqual(machine.evaluationStarting(on: "a", "second"), .busy)
        XCTAssertEqual(machine.evaluationStarting(on: "b", "other"), .started(nil))
        let proven = ContextAuthorization(at: t0, biometric: true)
        machine.evaluationFinished(on: "a", proven: proven, now: t0, lifetime: 300)
        XCTAssertEqual(machine.evaluationStarting(on: "a", "third"), .started(proven))
    }

    func testInvalidationEndsWhatRunsOnTheContextAndLaterRequestsRunUntracked() throws {
        var machine = greeted()
        _ = machine.evaluationStarting(on: "a", "evaluation")
        XCTAssertEqual(try machine.requestStarting(on: "a", "keychain read"), .tracked(ticket: 0))
        XCTAssertEqual(try machine.requestStarting(on: "b", "elsewhere"), .tracked(ticket: 1))
        XCTAssertEqual(machine.runningCount, 2)
        XCTAssertEqual(machine.invalidate("a"), ["evaluation", "keychain read"])
        XCTAssertEqual(machine.runningCount, 1)
        XCTAssertEqual(try machine.requestStarting(on: "a", "later"), .untracked)
        XCTAssertEqual(machine.evaluationStarting(on: "a", "later evaluation"), .invalidated)
        XCTAssertFalse(try machine.useContext("a"))
        XCTAssertTrue(try machine.useContext("c"))
        machine.requestEnded(on: "b", ticket: 1)
        XCTAssertEqual(machine.runningCount, 0)
    }

    func testTooManyRunningRequestsAreRefusedAsBusy() throws {
        var machine = greeted()
        for i in 0..<ContextTable<String>.maxRunning { _ = try machine.requestStarting(on: "c\(i % 3)", "r\(i)") }
        XCTAssertThrowsError(try machine.requestStarting(on: "c0", "one more")) { error in
            XCTAssertEqual((error as? Failure)?.code, .busy)
        }
    }

    func testTheAgentRoleIsTakenOnceAndEndsWithTheConnection() {
        var machine = greeted()
        XCTAssertNil(machine.servingAgent)
        XCTAssertEqual(machine.agentStarting("agent"), .register)
        XCTAssertNil(machine.servingAgent, "not serving before the daemon registered it")
        XCTAssertEqual(machine.agentStarting("another"), .alreadyServing)
        XCTAssertTrue(machine.agentRegistered())
        XCTAssertEqual(machine.servingAgent, "agent")
        XCTAssertEqual(machine.agentStarting("another"), .alreadyServing)
        let closing = machine.closed()
        XCTAssertEqual(closing.agent, "agent")
        XCTAssertNil(machine.servingAgent)
    }

    func testAnAgentRefusedByTheDaemonLeavesTheRoleFree() {
        var machine = greeted()
        XCTAssertEqual(machine.agentStarting("agent"), .register)
        machine.agentRefused()
        XCTAssertNil(machine.servingAgent)
        XCTAssertEqual(machine.agentStarting("agent"), .register)
    }

    func testAConnectionThatClosesWhileItsAgentIsRegisteredHasTheAgentRemoved() {
        var machine = greeted()
        XCTAssertEqual(machine.agentStarting("agent"), .register)
        XCTAssertNil(machine.closed().agent, "not yet serving: the registering side removes it")
        XCTAssertFalse(machine.agentRegistered(), "closed meanwhile: the shell removes the agent it registered")
        XCTAssertNil(machine.servingAgent)
    }

    func testClosingEndsEverythingOnceAndNothingStartsAfter() throws {
        var machine = greeted()
        _ = machine.evaluationStarting(on: "a", "evaluation")
        _ = try machine.requestStarting(on: "b", "key use")
        XCTAssertTrue(machine.whenClosed("prompt reading a secret"))
        XCTAssertTrue(machine.whenClosed("another"))
        let closing = machine.closed()
        XCTAssertEqual(closing.ending.sorted(), ["evaluation", "key use"])
        XCTAssertEqual(closing.waiters, ["prompt reading a secret", "another"])
        XCTAssertEqual(machine.phase, .closed)

        let again = machine.closed()
        XCTAssertTrue(
            again.ending.isEmpty && again.waiters.isEmpty && again.agent == nil,
            "closing twice ends nothing twice"
        )
        XCTAssertFalse(machine.whenClosed("late"), "closed already: the shell runs it at once")
        XCTAssertEqual(machine.requestArrived(.status), .drop)
        XCTAssertEqual(machine.requestArrived(hello), .drop)
        XCTAssertEqual(try machine.requestStarting(on: "c", "late request"), .closed)
        XCTAssertEqual(machine.evaluationStarting(on: "c", "late evaluation"), .invalidated)
        XCTAssertEqual(machine.agentStarting("agent"), .closed)
        XCTAssertFalse(machine.helloDeadlinePassed())
        XCTAssertEqual(machine.runningCount, 0)
    }
}
