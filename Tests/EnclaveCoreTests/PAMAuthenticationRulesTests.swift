import EnclaveProtocol
import XCTest

@testable import EnclaveCore

/// Who may ask the daemon to authenticate whom, and with what (issue 32's rules, before the module
/// and its request): each row a request and the facts the daemon would gather, and the decision.
final class PAMAuthenticationRulesTests: XCTestCase {
    typealias Rules = PAMAuthenticationRules

    private func request(
        _ user: String = "alice",
        service: String = "sudo",
        tty: String? = "/dev/pts/3",
        rhost: String? = nil,
        password: Rules.PasswordMode = .login
    ) -> Rules.Request {
        Rules.Request(user: user, service: service, tty: tty, remoteHost: rhost, password: password)
    }

    private func facts(
        peer: UInt32 = 0,
        user: UInt32? = 1000,
        remote: Bool? = false,
        seat: String? = "seat0",
        lidClosed: Bool = false,
        onlyBuiltIn: Bool = false,
        sessionOf: UInt32?? = .none,
        checkable: Bool = true,
        shown: Bool = true,
        clients: [Rules.Place] = [],
        throughServiceManager: Bool = false,
        agent: Bool = false,
        emulatorOnSeat: Bool = false
    ) -> Rules.Facts {
        Rules.Facts(
            peerUID: peer,
            userUID: user,
            sessionRemote: remote,
            seat: seat,
            localHostNames: ["localhost", "127.0.0.1", "::1", "Laptop"],
            lidClosed: lidClosed,
            onlyBuiltInReader: onlyBuiltIn,
            // The user's own session, unless the row says whose.
            sessionUID: sessionOf ?? user,
            passwordCheckable: checkable,
            promptShown: shown,
            multiplexerClients: clients,
            throughServiceManager: throughServiceManager,
            drawnByAgent: agent,
            terminalDrawnOnTheSeat: emulatorOnSeat
        )
    }

    /// The decision's kind, with the reason's key words where there is one.
    private func shape(_ decision: Rules.Decision) -> String {
        switch decision {
        case .refuse(let why): "refuse: \(why)"
        case .fingerOrPassword: "finger or password"
        case .fingerOnly: "finger only"
        case .passwordOnly(let why): "password only: \(why)"
        case .unavailable(let why): "unavailable: \(why)"
        }
    }

    func testWhoMayAskForWhomAndWithWhat() {
        let rows: [(String, Rules.Request, Rules.Facts, String)] = [
            ("sudo (root) for a local user at the seat", request(), facts(), "finger or password"),
            ("finger only", request(password: .none), facts(), "finger only"),
            // A user's own process (a lock screen) never feeds the daemon's counted password.
            ("a lock screen for its own user", request(service: "swaylock"), facts(peer: 1000), "finger only"),
            // Attacks: another user's process, a user that does not exist, a name that forges log lines.
            (
                "a user's process asking about another user", request("bob"), facts(peer: 1000, user: 1001),
                "refuse: uid 1000 may not ask to authenticate bob"
            ),
            (
                "a name that would forge log lines", request("eve\nroot ok"), facts(peer: 1000, user: 1001),
                "refuse: uid 1000 may not ask to authenticate eve\\u{A}root ok"
            ),
            // An unknown name is only unavailable: nothing tells a caller which users exist.
            ("an unknown user", request("nobody-here"), facts(user: nil), "unavailable: no local user of that name"),
            // Where comes before who: sshd's pre-authentication gets the same answer for every name.
            (
                "sshd before authentication, an unknown name", request("nobody-here"), facts(user: nil, remote: nil),
                "unavailable: the requesting process is in no login session"
            ),
            // su alice (root) in bob's session: bob is at the reader.
            (
                "root for another user than the session's", request(), facts(sessionOf: 1001),
                "unavailable: the session at the seat is another user's"
            ),
            (
                "a session whose owner logind does not state", request(), facts(sessionOf: .some(nil)),
                "unavailable: the session at the seat is another user's"
            ),
            // The password only where the daemon can check it and the person can type it.
            (
                "the daemon cannot read the password hashes", request(), facts(checkable: false),
                "finger only"
            ),
            ("no terminal and no agent: nowhere to type", request(), facts(shown: false), "finger only"),
            (
                "the lid closed and nowhere to type", request(),
                facts(lidClosed: true, onlyBuiltIn: true, shown: false),
                "unavailable: the lid is closed over the only reader"
            ),
            // Not at this machine: nothing offered, the next module asks at once, and nothing from
            // the network reaches the daemon's counter. A forged empty rhost does not make SSH local.
            (
                "SSH: a remote session, whatever the module claims", request(rhost: nil), facts(remote: true),
                "unavailable: a remote session"
            ),
            (
                "a remote host named", request(rhost: "203.0.113.9"), facts(),
                "unavailable: the request comes from another host (203.0.113.9)"
            ),
            ("sudo names the local host", request(rhost: "laptop"), facts(), "finger or password"),
            ("in other case, with a final dot", request(rhost: "LAPTOP."), facts(), "finger or password"),
            (
                "no login session (sshd before authentication, a socket-activated polkit helper)", request(),
                facts(remote: nil), "unavailable: the requesting process is in no login session"
            ),
            ("no seat", request(), facts(seat: nil), "unavailable: the session has no seat"),
            ("an empty seat, as logind says none", request(), facts(seat: ""), "unavailable: the session has no seat"),
            // The lid closed over the only reader: root's request asks the password alone.
            (
                "the lid closed over the only reader", request(), facts(lidClosed: true, onlyBuiltIn: true),
                "password only: the lid is closed over the only reader"
            ),
            (
                "the lid closed, a lock screen", request(), facts(peer: 1000, lidClosed: true, onlyBuiltIn: true),
                "unavailable: the lid is closed over the only reader"
            ),
            ("the lid closed, an external reader", request(), facts(lidClosed: true), "finger or password"),
            (
                "remote with password=none", request(password: .none), facts(remote: true),
                "unavailable: a remote session"
            ),
            // A process of the user's service manager (a desktop's polkit agent, but just as well a
            // job scheduled over SSH) stands in the display session: only the agent's window on
            // the seat shows the person who asks.
            (
                "the user's service manager, the agent drawing", request(),
                facts(throughServiceManager: true, agent: true), "finger or password"
            ),
            (
                "the user's service manager, a terminal an emulator of it draws on the seat", request(),
                facts(throughServiceManager: true, emulatorOnSeat: true), "finger or password"
            ),
            (
                "the user's service manager, on any other terminal", request(), facts(throughServiceManager: true),
                "unavailable: a process of the user's service manager, with no prompt agent"
            ),
            (
                "the user's service manager, nothing drawn", request(),
                facts(shown: false, throughServiceManager: true),
                "unavailable: a process of the user's service manager, with no prompt agent"
            ),
            // sudo in tmux (or screen) started at the seat: who looks through each client attached.
            (
                "tmux attached at the seat only", request(),
                facts(clients: [.init(remote: false, seat: "seat0"), .init(remote: false, seat: "seat0")]),
                "finger or password"
            ),
            (
                "tmux also attached over SSH", request(),
                facts(clients: [.init(remote: false, seat: "seat0"), .init(remote: true, seat: nil)]),
                "password only: the terminal is also attached from a remote session"
            ),
            (
                "tmux attached from a process in no session", request(), facts(clients: [.unknown]),
                "password only: the terminal is also attached from outside a session at a seat"
            ),
            (
                "tmux attached from a local session with no seat", request(),
                facts(clients: [.init(remote: false, seat: "")]),
                "password only: the terminal is also attached from outside a session at a seat"
            ),
            (
                "tmux over SSH, a lock screen's finger alone", request(),
                facts(peer: 1000, clients: [.init(remote: true, seat: nil)]),
                "unavailable: the terminal is also attached from a remote session"
            ),
            (
                "tmux over SSH, password=none", request(password: .none),
                facts(clients: [.init(remote: true, seat: nil)]),
                "unavailable: the terminal is also attached from a remote session"
            ),
        ]
        for (what, request, facts, expected) in rows {
            let decided = shape(Rules.decide(request, facts))
            XCTAssertTrue(decided.hasPrefix(expected), "\(what): \(decided)")
        }
    }

    /// What can pass before a prompt opens: a refused finger with a closed password gate is a
    /// durable lockout (`locked`) where the password was offered, only unavailable where it was not.
    func testWhatPassesBeforeThePromptOpens() {
        let why = "the lid is closed over the only reader"
        let rows: [(String, Rules.Decision, Bool, PasscodeGate, PAMOutcome?)] = [
            ("both offered, both open", .fingerOrPassword, false, .open, nil),
            ("finger locked, password open: the password alone", .fingerOrPassword, true, .open, nil),
            ("finger locked, password delayed", .fingerOrPassword, true, .wait(seconds: 60), .locked),
            ("finger locked, password disabled", .fingerOrPassword, true, .disabled, .locked),
            ("finger usable, password delayed: the finger may still pass", .fingerOrPassword, false, .disabled, nil),
            ("password alone, delayed", .passwordOnly(why), false, .wait(seconds: 5), .locked),
            ("password alone, open", .passwordOnly(why), false, .open, nil),
            ("finger alone, locked: the next module asks", .fingerOnly, true, .disabled, .unavailable),
            ("finger alone, usable", .fingerOnly, false, .disabled, nil),
            ("refused", .refuse("uid 1000 may not"), false, .open, .refused),
            ("unavailable", .unavailable("a remote session"), false, .open, .unavailable),
        ]
        for (what, decision, fingerRefused, gate, expected) in rows {
            XCTAssertEqual(
                Rules.before(decision, biometryRefused: fingerRefused, password: gate)?.0,
                expected,
                what
            )
        }
    }

    /// Each evaluation end as the module's outcome (the return-code table in docs/architecture.md).
    func testEvaluationEndsAsTheModulesOutcomes() {
        let rows: [(EvaluationMachine.Outcome, fingerOnly: Bool, PAMOutcome)] = [
            (.success(.biometric), false, .success),
            (.success(.passcode), false, .success),
            (.success(.reused), true, .success),
            (.failure(.userCancel, "Canceled by user."), false, .cancelled),
            (.failure(.authenticationFailed, "Application retry limit exceeded."), true, .wrong),
            (.failure(.biometryLockout, "locked"), true, .unavailable),
            (.failure(.biometryLockout, "the state was refused"), false, .locked),
            (.failure(.systemCancel, "The prompt timed out."), false, .unavailable),
            (.failure(.biometryNotEnrolled, "none"), true, .unavailable),
            (.failure(.passcodeNotSet, "none"), false, .unavailable),
        ]
        for (result, fingerOnly, expected) in rows {
            XCTAssertEqual(Rules.outcome(of: result, fingerOnly: fingerOnly), expected, "\(result)")
        }
        XCTAssertEqual(Rules.evaluation(for: .fingerOrPassword)?.policy, .deviceOwnerAuthentication)
        XCTAssertEqual(Rules.evaluation(for: .fingerOnly)?.policy, .deviceOwnerAuthenticationWithBiometrics)
        XCTAssertEqual(Rules.evaluation(for: .passwordOnly("lid"))?.passwordOnly, true)
        XCTAssertNil(Rules.evaluation(for: .unavailable("remote")))
        XCTAssertNil(Rules.evaluation(for: .refuse("no")))
    }
}
