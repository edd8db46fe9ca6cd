import EnclaveCore
import EnclaveProtocol
import XCTest

/// Who may be the prompt agent, which agent draws whose prompt, and which answers a screen takes.
final class PromptAgentsTests: XCTestCase {
    private let agentPath = "/usr/bin/laenclaved-agent"

    func testOnlyTheVerifiedAgentExecutableIsAdmitted() {
        let cases: [(AppIdentity, String?, Bool)] = [
            (AppIdentity(name: agentPath, kind: .app), agentPath, true),
            (AppIdentity(name: agentPath, kind: .app), nil, false),
            (AppIdentity(name: agentPath, kind: .app), "", false),
            (AppIdentity(name: agentPath, kind: .app), "/usr/local/bin/laenclaved-agent", false),
            (AppIdentity(name: agentPath, kind: .interpreter), agentPath, false),
            (AppIdentity(name: agentPath, kind: .unverified), agentPath, false),
            (AppIdentity(name: "unverified:8:9:" + agentPath, kind: .unverified), agentPath, false),
            (AppIdentity.administrator, agentPath, false),
            (AppIdentity(name: agentPath + "/", kind: .app), agentPath, false),
            (AppIdentity(name: "/usr/bin/python3", kind: .interpreter), agentPath, false),
        ]
        for (identity, configured, admitted) in cases {
            XCTAssertEqual(
                PromptAgents<Int>.admits(identity, agentPath: configured),
                admitted,
                "\(identity.name) (\(identity.kind)) with \(configured ?? "nil")"
            )
        }
    }

    func testOneAgentPerSeatAndAnAppFindsOnlyItsSeatsAgent() {
        var agents = PromptAgents<String>()
        let desktop = PromptSeat(uid: 1000, session: "2")
        let ssh = PromptSeat(uid: 1000, session: "7")
        let outside = PromptSeat(uid: 1000, session: nil)
        XCTAssertEqual(agents.register("desktop", connection: 1, seat: desktop), .registered)
        XCTAssertEqual(agents.register("unit", connection: 2, seat: outside), .registered)
        guard case .refused(let why) = agents.register("second", connection: 3, seat: desktop) else {
            return XCTFail("two agents for one seat")
        }
        XCTAssertTrue(why.contains("another prompt agent"), why)
        guard case .refused = agents.register("again", connection: 1, seat: desktop) else {
            return XCTFail("one connection serving twice")
        }
        XCTAssertEqual(agents.agent(for: desktop), "desktop")
        XCTAssertEqual(agents.agent(for: outside), "unit")
        XCTAssertNil(agents.agent(for: ssh), "an app in another session of the user gets no agent")
        XCTAssertNil(
            agents.agent(for: PromptSeat(uid: 1001, session: "2")),
            "nor another user's app in a session of that number"
        )
        agents.remove(connection: 1)
        XCTAssertNil(agents.agent(for: desktop))
        XCTAssertEqual(
            agents.register("second", connection: 3, seat: desktop),
            .registered,
            "the seat is free once its agent left"
        )
        agents.remove(connection: 3)
        agents.remove(connection: 2)
        agents.remove(connection: 2)
        XCTAssertNil(agents.agent(for: outside))
        XCTAssertNil(agents.agent(for: desktop))
    }

    func testAnAnswerIsTakenOnlyWhereTheScreenOffersIt() {
        func screen(
            passcode: Bool = true,
            fallback: String? = nil,
            retry: Bool = false,
            simulated: Bool = false,
            armed: Bool = true
        ) -> PromptScreen {
            PromptScreen(
                app: "/usr/bin/app",
                reason: "r",
                instruction: "i",
                cancelTitle: "Cancel",
                fallbackTitle: fallback,
                passcodeEntry: passcode,
                retryOffered: retry,
                sensorArmed: armed,
                sensorName: "Touch ID",
                sensorSimulated: simulated,
                passcodeRetryAfter: nil,
                passcodeDisabled: false
            )
        }
        let long = String(repeating: "9", count: WireLimits.maxPasscodeBytes + 1)
        let cases: [(PromptAction, PromptScreen?, PromptKeyboard.Action?)] = [
            (.typed("1234"), screen(), .passcode("1234")),
            (.typed("1234"), screen(passcode: false), nil),
            (.typed(""), screen(), nil),
            (PromptAction(.passcode), screen(), nil),
            (.typed(long), screen(), nil),
            (PromptAction(.cancel), screen(), .cancel),
            (PromptAction(.cancel), nil, nil),
            (PromptAction(.fallback), screen(), nil),
            (PromptAction(.fallback), screen(fallback: "Enter Password"), .fallback),
            (PromptAction(.retry), screen(), nil),
            (PromptAction(.retry), screen(retry: true), .retry),
            (PromptAction(.simulatedMatch), screen(), nil),
            (PromptAction(.simulatedMatch), screen(simulated: true), .simulatedMatch),
            (PromptAction(.simulatedMatch), screen(simulated: true, armed: false), nil),
            (PromptAction(.simulatedNoMatch), screen(simulated: true), .simulatedNoMatch),
            (PromptAction(.shown), screen(), nil),
        ]
        for (answer, shown, meant) in cases {
            XCTAssertEqual(
                PromptKeyboard.action(for: answer, on: shown),
                meant,
                "\(answer) on \(shown.map { "\($0)" } ?? "no screen")"
            )
        }
    }
}
