import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

typealias Action = EvaluationMachine.Action
typealias Outcome = EvaluationMachine.Outcome

enum Fixture {
    static let app = "/usr/bin/example-app"
    static let reason = "Unlock your notes"
    static let touch = DeviceFacts(sensor: .touchID, enrolled: true, passcodeSet: true)
    static let face = DeviceFacts(sensor: .faceID, enrolled: true, passcodeSet: true)
    static let noSensor = DeviceFacts(sensor: .none, enrolled: false, passcodeSet: true)

    static func config(
        _ policy: PolicyValue,
        _ facts: DeviceFacts = touch,
        fallbackTitle: String? = nil,
        cancelTitle: String? = nil,
        reuse: Double = 0,
        interactionNotAllowed: Bool = false,
        authorization: ContextAuthorization? = nil,
        lifetime: Double = ContextAuthorization.defaultLifetime
    )
        -> EvaluationMachine.Configuration
    {
        EvaluationMachine.Configuration(
            policy: policy,
            facts: facts,
            app: app,
            reason: reason,
            cancelTitle: cancelTitle,
            fallbackTitle: fallbackTitle,
            reuseDuration: reuse,
            interactionNotAllowed: interactionNotAllowed,
            sensorSimulated: true,
            contextAuthorization: authorization,
            contextLifetime: lifetime
        )
    }

    /// A distinct verifier output per index, so each wrong passcode counts.
    static func wrong(_ i: Int) -> Data {
        Data([0xAA, UInt8(truncatingIfNeeded: i), UInt8(truncatingIfNeeded: i >> 8)])
    }
}

/// Drives one evaluation against a ledger and checks, after every step, that each ledger change is
/// followed by `.persistLedger` before anything visible (`.show` / `.finish`).
struct Harness {
    var machine: EvaluationMachine
    var ledger: AttemptLedger
    let clock: ManualClock

    init(
        _ config: EvaluationMachine.Configuration,
        ledger: AttemptLedger = AttemptLedger(),
        clock: ManualClock = ManualClock()
    ) {
        self.machine = EvaluationMachine(config)
        self.ledger = ledger
        self.clock = clock
    }

    mutating func start(file: StaticString = #filePath, line: UInt = #line) -> [Action] {
        machine.start(ledger: ledger, now: clock.monotonic(), wall: clock.wall())
    }

    mutating func send(_ input: EvaluationMachine.Input, file: StaticString = #filePath, line: UInt = #line) -> [Action]
    {
        let before = ledger
        let actions = machine.handle(input, ledger: &ledger, now: clock.monotonic(), wall: clock.wall())
        if before != ledger {
            assertPersistFirst(actions, file: file, line: line)
        }
        return actions
    }

    /// Types a passcode and, when the machine asks for a check, answers it.
    mutating func typePasscode(
        correct: Bool,
        attempt: Data,
        file: StaticString = #filePath,
        line: UInt = #line
    ) -> [Action] {
        let typed = send(.passcodeTyped("typed"), file: file, line: line)
        guard typed == [.checkPasscode("typed")] else { return typed }
        return send(.passcodeChecked(correct: correct, attempt: attempt), file: file, line: line)
    }
}

func assertPersistFirst(_ actions: [Action], file: StaticString = #filePath, line: UInt = #line) {
    guard let persist = actions.firstIndex(of: .persistLedger) else {
        return XCTFail("ledger changed but no .persistLedger in \(actions)", file: file, line: line)
    }
    for (i, a) in actions.enumerated() {
        switch a {
        case .show, .finish:
            XCTAssertLessThan(persist, i, "visible action before .persistLedger in \(actions)", file: file, line: line)
        default: break
        }
    }
}

func screens(_ actions: [Action]) -> [PromptScreen] {
    actions.compactMap { if case .show(let s) = $0 { return s } else { return nil } }
}

func lastScreen(_ actions: [Action], file: StaticString = #filePath, line: UInt = #line) -> PromptScreen? {
    let s = screens(actions).last
    if s == nil { XCTFail("no screen in \(actions)", file: file, line: line) }
    return s
}

func outcome(_ actions: [Action]) -> Outcome? {
    for a in actions { if case .finish(let o) = a { return o } }
    return nil
}

func errorCode(_ actions: [Action]) -> LAErrorCode? {
    if case .failure(let code, _)? = outcome(actions) { return code }
    return nil
}

func isIgnored(_ actions: [Action]) -> Bool {
    actions.count == 1 && { if case .ignored = actions[0] { return true } else { return false } }()
}

extension AttemptLedger {
    /// A ledger after `n` distinct wrong passcodes at the clock's current time.
    static func withPasscodeFailures(_ n: Int, clock: ManualClock) -> AttemptLedger {
        var l = AttemptLedger()
        for i in 0..<n { l.recordPasscodeFailure(attempt: Fixture.wrong(i), now: clock.monotonic()) }
        return l
    }
    static func withBiometricFailures(_ n: Int) -> AttemptLedger {
        var l = AttemptLedger()
        for _ in 0..<n { l.recordBiometricFailure() }
        return l
    }
}
