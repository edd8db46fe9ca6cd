import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import XCTest

@testable import EnclaveServer

/// The graphical prompt agent, in-process: a real `EnclaveDaemon`, an app's connection and the
/// agent's connection, each with its own recording sink. Who may be the agent, where an app's
/// prompt goes, and what happens when the agent misbehaves.
final class PromptAgentTests: XCTestCase {
    typealias Sink = ConnectionHandlerTests.RecordingReplySink

    private let agentPath = "/usr/bin/laenclaved-agent"
    private let appPath = "/usr/bin/example-app"
    private var directory: String!
    private var daemon: EnclaveDaemon!
    private var handlers: [ConnectionHandler] = []
    private let jobs = ConnectionJobs()
    private var app: (handler: ConnectionHandler, sink: Sink)!
    private var nextID: UInt64 = 1

    override func setUp() async throws {
        directory = NSTemporaryDirectory() + "prompt-agent-\(UUID().uuidString)"
        var config = DaemonConfiguration.inProcess(directory)
        config.promptAgentPath = agentPath
        config.promptAgentAnswerTimeout = 0.5
        daemon = try EnclaveDaemon(config: config, clock: ManualClock(), logger: Logger(label: "test"))
        // The test plays the handoff socket (`EnclaveDaemon.handOver`).
        daemon.handoff.serve(.everyone)
        app = try await connect(appPath)
        let setup = try await connect(appPath)
        try await handSecrets(["1234", "1234"], on: setup)
        _ = try await request(.setPasscode, on: setup)
        _ = try await request(.enroll(.init(name: "right thumb")), on: setup)
    }

    override func tearDown() async throws {
        for handler in handlers { handler.closed() }
        await jobs.finished()
        daemon = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Harness

    private func connect(
        _ path: String,
        kind: AppIdentity.Kind = .app,
        session: String? = nil
    ) async throws -> (handler: ConnectionHandler, sink: Sink) {
        let sink = Sink()
        let handler = ConnectionHandler(
            peer: PeerIdentity(
                uid: getuid(),
                gid: getgid(),
                pid: getpid(),
                identity: AppIdentity(name: path, kind: kind),
                session: session
            ),
            daemon: daemon,
            sink: sink,
            logger: Logger(label: "test")
        )
        handlers.append(handler)
        _ = try await request(.hello(.init(version: enclaveProtocolVersion)), on: (handler, sink))
        return (handler, sink)
    }

    private func send(
        _ r: Request,
        on c: (handler: ConnectionHandler, sink: Sink),
        jobs: ConnectionJobs? = nil
    ) async -> UInt64 {
        let id = nextID
        nextID += 1
        await (jobs ?? self.jobs).receive(on: c.handler, RequestEnvelope(id: id, request: r).encoded())
        return id
    }

    @discardableResult
    private func request(_ r: Request, on c: (handler: ConnectionHandler, sink: Sink)) async throws -> Reply {
        try await c.sink.final(await send(r, on: c))
    }

    private func handSecrets(_ secrets: [String], on c: (handler: ConnectionHandler, sink: Sink)) async throws {
        guard case .handoffTicket(let ticket) = try await request(.handoff(.init(kind: .secretInput)), on: c) else {
            throw Failure(.internalError, "no ticket")
        }
        try daemon.handOver(secrets: secrets, ticket: ticket)
    }

    /// The agent's connection, serving: its `servePrompts` id with it.
    private func serveAsAgent(
        session: String? = nil
    ) async throws -> (connection: (handler: ConnectionHandler, sink: Sink), serving: UInt64) {
        let agent = try await connect(agentPath, session: session)
        let serving = await send(.servePrompts, on: agent)
        let event = try await agent.sink.event(serving)
        XCTAssertNotNil(event.serving, "the agent hears it serves")
        return (agent, serving)
    }

    private func evaluate(policy: Int = 2, on c: (handler: ConnectionHandler, sink: Sink)) async -> UInt64 {
        await send(
            .evaluate(
                .init(context: "c\(nextID)", policy: policy, options: EvaluationOptions(reason: "Unlock the vault"))
            ),
            on: c
        )
    }

    /// The person cancels `prompt` on the agent: the app's evaluation `id` answers userCancel.
    private func cancel(
        _ prompt: UInt64,
        on agent: (handler: ConnectionHandler, sink: Sink),
        answering id: UInt64,
        file: StaticString = #filePath,
        line: UInt = #line
    ) async throws {
        _ = try await request(.promptAction(.init(prompt: prompt, action: PromptAction(.cancel))), on: agent)
        guard case .evaluated(let result) = try await app.sink.final(id) else {
            return XCTFail("no evaluation", file: file, line: line)
        }
        XCTAssertEqual(result.error, .userCancel, file: file, line: line)
    }

    private func status() async throws -> UserStatus {
        guard case .status(let s) = try await request(.status, on: app) else {
            throw Failure(.internalError, "no status")
        }
        return s
    }

    // MARK: Who may serve

    /// Any app may ask to be the prompt agent — and read every passcode typed into it. Only the
    /// configured agent executable, as the kernel names it, is admitted: an app, an interpreter or
    /// an unverified executable claiming the agent's path are refused, and the app's prompts stay
    /// where they were.
    func testOnlyTheAgentExecutableMayServePrompts() async throws {
        for (name, kind) in [
            (appPath, AppIdentity.Kind.app), (agentPath, .interpreter), (agentPath, .unverified),
            ("unverified:1:2:" + agentPath, .unverified), (agentPath + "-copy", .app),
        ] {
            let impostor = try await connect(name, kind: kind)
            guard case .failure(let f) = try await request(.servePrompts, on: impostor) else {
                return XCTFail("\(name) (\(kind)) was admitted")
            }
            XCTAssertEqual(f.code, .notPermitted, f.message)
        }
        let evaluation = await evaluate(on: app)
        let screen = try await app.sink.prompt(evaluation)
        XCTAssertTrue(screen.passcodeEntry || screen.sensorArmed, "the app's prompt stayed headless")
        let promptAgent = try await status().promptAgent
        XCTAssertEqual(promptAgent, false)
        _ = await send(.invalidate(.init(context: "c\(evaluation)")), on: app)
    }

    /// With no agent configured (`prompt-agent = none`), nothing is admitted.
    func testNoAgentConfiguredAdmitsNothing() {
        XCTAssertFalse(PromptAgents<Int>.admits(AppIdentity(name: agentPath, kind: .app), agentPath: nil))
        XCTAssertFalse(PromptAgents<Int>.admits(AppIdentity(name: agentPath, kind: .app), agentPath: ""))
    }

    /// One agent per session: a second is refused while the first serves, and serves once it left.
    func testASecondAgentForTheSessionIsRefusedUntilTheFirstLeaves() async throws {
        let first = try await serveAsAgent()
        let second = try await connect(agentPath)
        guard case .failure(let f) = try await request(.servePrompts, on: second) else {
            return XCTFail("two agents serve one session")
        }
        XCTAssertEqual(f.code, .busy)
        XCTAssertTrue(f.message.contains("another prompt agent"), f.message)
        first.connection.handler.closed()
        let again = await send(.servePrompts, on: second)
        let serving = try await second.sink.event(again).serving
        XCTAssertNotNil(serving)
    }

    // MARK: Where the prompt goes

    /// With the agent serving, the app's prompt is drawn by the agent: the app gets no screen and
    /// no way to answer; the passcode typed in the agent's window passes the evaluation.
    func testTheAgentDrawsTheAppsPromptAndThePasscodeNeverReachesTheApp() async throws {
        let agent = try await serveAsAgent()
        let promptAgent = try await status().promptAgent
        XCTAssertEqual(promptAgent, true)
        let evaluation = await evaluate(policy: 2, on: app)
        let shown = try await agent.connection.sink.event(agent.serving)
        let screen = try XCTUnwrap(shown.screen)
        XCTAssertEqual(screen.app, appPath, "the agent shows the app's verified identity")
        XCTAssertEqual(screen.reason, "Unlock the vault")
        _ = try await request(
            .promptAction(.init(prompt: shown.prompt, action: PromptAction(.shown))),
            on: agent.connection
        )
        var current = screen
        if !current.passcodeEntry {
            _ = try await request(
                .promptAction(.init(prompt: shown.prompt, action: PromptAction(.fallback))),
                on: agent.connection
            )
            let next = try await agent.connection.sink.event(agent.serving)
            current = try XCTUnwrap(next.screen)
        }
        XCTAssertTrue(current.passcodeEntry)
        // The app cannot answer its own prompt, even knowing the agent's numbering.
        guard
            case .failure(let refused) = try await request(
                .promptAction(.init(prompt: shown.prompt, action: .typed("1234"))),
                on: app
            )
        else {
            return XCTFail("the app answered the agent's prompt")
        }
        XCTAssertEqual(refused.code, .notPermitted)
        _ = try await request(.promptAction(.init(prompt: shown.prompt, action: .typed("1234"))), on: agent.connection)
        guard case .evaluated(let result) = try await app.sink.final(evaluation) else {
            return XCTFail("no evaluation")
        }
        XCTAssertTrue(result.success, "\(result)")
        let appSawAPrompt = app.sink.sawPrompt(evaluation)
        XCTAssertFalse(appSawAPrompt, "the app got no screen: the agent drew it")
        let closed = try await agent.connection.sink.event(agent.serving)
        XCTAssertEqual(closed.prompt, shown.prompt)
        XCTAssertEqual(closed.closed, "authenticated")
    }

    /// An answer the screen does not offer is refused and counts nothing: a passcode where none is
    /// taken, an empty one, a fallback not shown, Face ID's Try Again with Touch ID, a prompt that
    /// is not open.
    func testAnswersTheScreenDoesNotOfferAreRefused() async throws {
        let agent = try await serveAsAgent()
        let evaluation = await evaluate(policy: 1, on: app)
        let shown = try await agent.connection.sink.event(agent.serving)
        let screen = try XCTUnwrap(shown.screen)
        _ = try await request(
            .promptAction(.init(prompt: shown.prompt, action: PromptAction(.shown))),
            on: agent.connection
        )
        XCTAssertFalse(screen.passcodeEntry, "biometrics only: no passcode on the first screen")
        var refused: [PromptAction] = [.typed(""), PromptAction(.retry)]
        if !screen.passcodeEntry { refused.append(.typed("1234")) }
        if screen.fallbackTitle == nil { refused.append(PromptAction(.fallback)) }
        for action in refused {
            guard
                case .failure(let f) = try await request(
                    .promptAction(.init(prompt: shown.prompt, action: action)),
                    on: agent.connection
                )
            else {
                return XCTFail("\(action) was taken")
            }
            XCTAssertEqual(f.code, .invalidParameter, "\(action): \(f.message)")
        }
        guard
            case .failure(let f) = try await request(
                .promptAction(.init(prompt: 999, action: PromptAction(.cancel))),
                on: agent.connection
            )
        else {
            return XCTFail("an answer to no prompt was taken")
        }
        XCTAssertEqual(f.code, .invalidParameter)
        try await cancel(shown.prompt, on: agent.connection, answering: evaluation)
        let s = try await status()
        XCTAssertEqual(s.passcodeFailures, 0)
        XCTAssertEqual(s.biometricFailures, 0)
    }

    // MARK: When the agent fails

    /// An agent that never says its window is up is dropped after the answer timeout: the prompt
    /// moves to the next presenter (here headless: the app gets the screen), the agent's
    /// `servePrompts` ends with a clear error, and the next prompt does not wait for it.
    func testAnAgentThatNeverAnswersIsDroppedAndThePromptMovesOn() async throws {
        let agent = try await serveAsAgent()
        let evaluation = await evaluate(on: app)
        let shown = try await agent.connection.sink.event(agent.serving)
        let moved = try await app.sink.prompt(evaluation, timeout: 5)
        XCTAssertEqual(moved, shown.screen, "the app's prompt moved to headless with the screen the agent had")
        guard case .failure(let dropped) = try await agent.connection.sink.final(agent.serving) else {
            return XCTFail("the agent was not told")
        }
        XCTAssertTrue(dropped.message.contains("no longer serves"), dropped.message)
        let promptAgent = try await status().promptAgent
        XCTAssertEqual(promptAgent, false)
        _ = await send(.invalidate(.init(context: "c\(evaluation)")), on: app)
        guard case .evaluated(let result) = try await app.sink.final(evaluation) else {
            return XCTFail("no evaluation")
        }
        XCTAssertEqual(result.error, .appCancel)
    }

    /// The agent's connection closes mid-prompt (it crashed, the session ended): the prompt moves
    /// on with the screen it had, and nothing is counted.
    func testAnAgentGoneMidPromptHandsThePromptOn() async throws {
        let agent = try await serveAsAgent()
        let evaluation = await evaluate(on: app)
        let shown = try await agent.connection.sink.event(agent.serving)
        _ = try await request(
            .promptAction(.init(prompt: shown.prompt, action: PromptAction(.shown))),
            on: agent.connection
        )
        agent.connection.handler.closed()
        let moved = try await app.sink.prompt(evaluation)
        XCTAssertEqual(moved.instruction, shown.screen?.instruction)
        try await request(.simulate(.init(events: [SimulatedEvent(.match)])), on: app)
        guard case .evaluated(let result) = try await app.sink.final(evaluation) else {
            return XCTFail("no evaluation")
        }
        XCTAssertTrue(result.success, "the person still answered: \(result)")
        let failures = try await status().passcodeFailures
        XCTAssertEqual(failures, 0)
    }

    /// The agent's simulation keys are touches on the simulated sensor: a no-match counts, a match
    /// answers, both read by the sensor while it is armed.
    func testTheAgentsSimulatedTouchesAreReadByTheSensor() async throws {
        let agent = try await serveAsAgent()
        let evaluation = await evaluate(policy: 1, on: app)
        let shown = try await agent.connection.sink.event(agent.serving)
        XCTAssertEqual(shown.screen?.sensorSimulated, true)
        XCTAssertEqual(shown.screen?.sensorArmed, true)
        _ = try await request(
            .promptAction(.init(prompt: shown.prompt, action: PromptAction(.shown))),
            on: agent.connection
        )
        let sensor = try XCTUnwrap(daemon.sensor as? SimulatedSensor)
        // The armed sensor is capturing.
        try await SimulatedSensorTests.waitForCapture(sensor, uid: getuid())
        _ = try await request(
            .promptAction(.init(prompt: shown.prompt, action: PromptAction(.simulatedNoMatch))),
            on: agent.connection
        )
        let retry = try await agent.connection.sink.event(agent.serving)
        XCTAssertEqual(retry.screen?.instruction.contains("Try Again"), true, "\(String(describing: retry.screen))")
        let failures = try await status().biometricFailures
        XCTAssertEqual(failures, 1)
        // The reading ended that capture, and the sensor reads again.
        try await SimulatedSensorTests.waitForCapture(sensor, uid: getuid())
        _ = try await request(
            .promptAction(.init(prompt: shown.prompt, action: PromptAction(.simulatedMatch))),
            on: agent.connection
        )
        guard case .evaluated(let result) = try await app.sink.final(evaluation) else {
            return XCTFail("no evaluation")
        }
        XCTAssertTrue(result.success, "\(result)")
    }

    // MARK: Administration

    /// Administration asks the person on the agent too: an app with no terminal and no pipe is
    /// refused without an agent, and with one the daemon asks in the agent's window, saying what
    /// is being allowed; the app never holds the passcode.
    func testAdministrationAsksThePersonOnTheAgent() async throws {
        guard case .failure(let nobody) = try await request(.keychainList, on: app) else {
            return XCTFail("listed without the person")
        }
        XCTAssertEqual(nobody.code, .notPermitted)
        let agent = try await serveAsAgent()
        let listing = await send(.keychainList, on: app)
        let shown = try await agent.connection.sink.event(agent.serving)
        let screen = try XCTUnwrap(shown.screen)
        _ = try await request(
            .promptAction(.init(prompt: shown.prompt, action: PromptAction(.shown))),
            on: agent.connection
        )
        XCTAssertTrue(screen.reason.hasPrefix("Allow it to "), screen.reason)
        XCTAssertEqual(screen.administration, true, "administration reads apart from an app's evaluation")
        XCTAssertTrue(screen.heading.contains("permission"), screen.heading)
        XCTAssertTrue(screen.passcodeEntry)
        _ = try await request(.promptAction(.init(prompt: shown.prompt, action: .typed("1234"))), on: agent.connection)
        guard case .keychainListing = try await app.sink.final(listing) else { return XCTFail("not listed") }
    }

    /// The agent's window is closed when its administration ends badly too: the agent goes away
    /// mid-administration with no terminal to move to, and the request ends with a clear error.
    func testAnAgentLostDuringAdministrationEndsItClearly() async throws {
        let agent = try await serveAsAgent()
        let listing = await send(.keychainList, on: app)
        let shown = try await agent.connection.sink.event(agent.serving)
        XCTAssertEqual(shown.screen?.administration, true)
        agent.connection.handler.closed()
        guard case .failure(let f) = try await app.sink.final(listing) else {
            return XCTFail("listed without the person")
        }
        XCTAssertEqual(f.code, .notPermitted)
        XCTAssertTrue(f.message.contains("agent went away"), f.message)
    }

    /// An administration that waits its turn for the user's one prompt (another app's is open)
    /// ends when its client goes away: it neither waits out the queue's 30 s nor takes the prompt
    /// for nobody once the other one closes.
    func testAnAdministrationWaitingForThePromptEndsWhenItsClientGoesAway() async throws {
        let agent = try await serveAsAgent()
        let evaluation = await evaluate(on: app)
        let shown = try await agent.connection.sink.event(agent.serving)
        XCTAssertNotNil(shown.screen, "the app's prompt holds the user's one prompt")
        _ = try await request(
            .promptAction(.init(prompt: shown.prompt, action: PromptAction(.shown))),
            on: agent.connection
        )
        let gone = try await connect(appPath)
        let goneJobs = ConnectionJobs()
        let listing = await send(.keychainList, on: gone, jobs: goneJobs)
        gone.handler.closed()
        let ended = await goneJobs.finished(within: 5)
        XCTAssertTrue(ended, "the administration of a client that went away still waits for the prompt")
        guard case .failure(let refused) = try await gone.sink.final(listing, timeout: 1) else {
            return XCTFail("listed for a client that went away")
        }
        XCTAssertEqual(refused, PersonSecrets.clientWentAway.failure)
        try await cancel(shown.prompt, on: agent.connection, answering: evaluation)
        // The next prompt is the next app's, not the gone administration's.
        let next = await evaluate(on: app)
        var nextShown = try await agent.connection.sink.event(agent.serving)
        while nextShown.screen == nil { nextShown = try await agent.connection.sink.event(agent.serving) }
        XCTAssertNil(nextShown.screen?.administration, "\(String(describing: nextShown.screen))")
        XCTAssertEqual(nextShown.screen?.reason, "Unlock the vault")
        _ = await send(.invalidate(.init(context: "c\(next)")), on: app)
    }

    /// An answer to a prompt that has closed is refused, and changes nothing.
    func testAnAnswerAfterThePromptClosedIsRefused() async throws {
        let agent = try await serveAsAgent()
        let evaluation = await evaluate(on: app)
        let shown = try await agent.connection.sink.event(agent.serving)
        _ = try await request(
            .promptAction(.init(prompt: shown.prompt, action: PromptAction(.shown))),
            on: agent.connection
        )
        try await cancel(shown.prompt, on: agent.connection, answering: evaluation)
        guard
            case .failure(let late) = try await request(
                .promptAction(.init(prompt: shown.prompt, action: .typed("0000"))),
                on: agent.connection
            )
        else {
            return XCTFail("an answer to a closed prompt was taken")
        }
        XCTAssertEqual(late.code, .invalidParameter)
        let failures = try await status().passcodeFailures
        XCTAssertEqual(failures, 0)
    }

    /// An agent draws only the prompts of its own seat: an app in another session of the same user
    /// (ssh, a second login) keeps its own prompt; an app of the agent's session gets the agent.
    func testAnAgentServesOnlyItsOwnSession() async throws {
        let agent = try await serveAsAgent(session: "2")
        let elsewhere = try await connect(appPath, session: "7")
        let there = await evaluate(on: elsewhere)
        let headless = try await elsewhere.sink.prompt(there)
        XCTAssertFalse(headless.app.isEmpty)
        // One prompt per user at a time: this one ends before the next app asks.
        _ = await send(.invalidate(.init(context: "c\(there)")), on: elsewhere)
        _ = try await elsewhere.sink.final(there)
        let here = try await connect(appPath, session: "2")
        let evaluation = await evaluate(on: here)
        let shown = try await agent.connection.sink.event(agent.serving)
        XCTAssertEqual(shown.screen?.app, appPath)
        let hereSawAPrompt = here.sink.sawPrompt(evaluation)
        XCTAssertFalse(hereSawAPrompt)
        _ = await send(.invalidate(.init(context: "c\(evaluation)")), on: here)
    }
}

extension ConnectionHandlerTests.RecordingReplySink {
    /// The next `agentEvent` sent for `id`, taken.
    func event(_ id: UInt64, timeout: Double = 5) async throws -> AgentEvent {
        try await take(id, timeout: timeout) { if case .agentEvent(let e) = $0 { e } else { nil } }
    }

    /// The next `prompt` screen sent to the client for `id`, taken.
    func prompt(_ id: UInt64, timeout: Double = 5) async throws -> PromptScreen {
        try await take(id, timeout: timeout) { if case .prompt(let s) = $0 { s } else { nil } }
    }

    private func take<T>(_ id: UInt64, timeout: Double, _ pick: @escaping @Sendable (Reply) -> T?) async throws -> T {
        let reply = try await reply(id, takes: true, timeout: timeout) { pick($0) != nil }
        return pick(reply)!
    }
}
