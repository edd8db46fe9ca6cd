import EnclaveCore
import EnclaveProtocol
import XCTest

/// `AccessProofs`: which candidates of a protected request are proven, step by step, and what a
/// step that was not proven means.
final class AccessProofsTests: XCTestCase {
    private typealias Proofs = AccessProofs<String>

    /// How a run ended: the steps asked for, in order, and the result.
    private struct Run: Equatable {
        var asked: [EvaluationStep]
        var accepted: [String]?
        var waited = false
        var denial: AccessDenial?
    }

    /// Drives `proofs` as the connection does, answering each step from `answers` (success when
    /// they run out).
    private func run(
        _ candidates: [(String, AccessPlan)],
        _ rules: Proofs.Rules,
        answers: [EvaluationMachine.Outcome] = []
    ) -> Run {
        var proofs = Proofs(candidates.map { (candidate: $0.0, plan: $0.1) }, rules: rules, planned: .unbound)
        var asked: [EvaluationStep] = []
        var next = proofs.next()
        while true {
            switch next {
            case .prove(let step):
                guard case .prove(let again) = proofs.next(), again == step else {
                    XCTFail("asking again answers the same step")
                    return Run(asked: asked)
                }
                asked.append(step)
                next = proofs.stepEnded(asked.count <= answers.count ? answers[asked.count - 1] : .success(.biometric))
            case .finished(let accepted, let waited): return Run(asked: asked, accepted: accepted, waited: waited)
            case .denied(let denial): return Run(asked: asked, accepted: nil, denial: denial)
            }
        }
    }

    private let one = Proofs.Rules(wanted: 1, leaveOutInvalidated: false, leaveOutNotInteractive: false)
    private let all = Proofs.Rules(wanted: .max, leaveOutInvalidated: true, leaveOutNotInteractive: false)
    private let cancel = EvaluationMachine.Outcome.failure(.userCancel, "cancelled")
    private let noUI = EvaluationMachine.Outcome.failure(.notInteractive, "would prompt")
    private let gone = AccessPlan.invalidated(.enrolmentChanged)

    func testRuns() {
        let table: [(String, [(String, AccessPlan)], Proofs.Rules, [EvaluationMachine.Outcome], Run)] = [
            ("nothing to prove", [("a", .open), ("b", .open)], .every, [], Run(asked: [], accepted: ["a", "b"])),
            (
                "every step, in order", [("a", .prove([.biometric, .passcode]))], .every, [],
                Run(asked: [.biometric, .passcode], accepted: ["a"], waited: true)
            ),
            (
                "a failed step ends it with its code, and no second step is asked",
                [("a", .prove([.biometric, .passcode])), ("b", .prove([.owner]))],
                .every, [cancel], Run(asked: [.biometric], accepted: nil, denial: .failed(.userCancel, "cancelled"))
            ),
            (
                "an invalidated candidate is never proven", [("a", gone), ("b", .prove([.owner]))], .every, [],
                Run(asked: [], accepted: nil, denial: .invalidated(.enrolmentChanged))
            ),
            (
                "one wanted: the first, and only it", [("a", .prove([.owner])), ("b", .prove([.owner]))], one, [],
                Run(asked: [.owner], accepted: ["a"], waited: true)
            ),
            (
                "one wanted: an open first needs no prompt", [("a", .open), ("b", .prove([.owner]))], one, [],
                Run(asked: [], accepted: ["a"])
            ),
            (
                "one wanted: the first invalidated refuses", [("a", gone), ("b", .open)], one, [],
                Run(asked: [], accepted: nil, denial: .invalidated(.enrolmentChanged))
            ),
            (
                "all: invalidated ones left out", [("a", gone), ("b", .prove([.biometric])), ("c", .open)], all, [],
                Run(asked: [.biometric], accepted: ["b", "c"], waited: true)
            ),
            (
                "all: up to the limit", [("a", .open), ("b", .prove([.biometric])), ("c", .open)],
                Proofs.Rules(wanted: 2, leaveOutInvalidated: true, leaveOutNotInteractive: false), [],
                Run(asked: [.biometric], accepted: ["a", "b"], waited: true)
            ),
            (
                "all: a cancel still refuses the request", [("a", .open), ("b", .prove([.biometric]))], all, [cancel],
                Run(asked: [.biometric], accepted: nil, denial: .failed(.userCancel, "cancelled"))
            ),
            (
                "skip: an item that would prompt is left out, and the request has waited on its evaluation",
                [("a", .prove([.biometric])), ("b", .open)],
                Proofs.Rules(wanted: 1, leaveOutInvalidated: false, leaveOutNotInteractive: true), [noUI],
                Run(asked: [.biometric], accepted: ["b"], waited: true)
            ),
            (
                "skip leaves out only what would prompt", [("a", .prove([.biometric])), ("b", .open)],
                Proofs.Rules(wanted: 1, leaveOutInvalidated: false, leaveOutNotInteractive: true), [cancel],
                Run(asked: [.biometric], accepted: nil, denial: .failed(.userCancel, "cancelled"))
            ),
            (
                "without skip, not interactive refuses", [("a", .prove([.biometric])), ("b", .open)], one, [noUI],
                Run(asked: [.biometric], accepted: nil, denial: .failed(.notInteractive, "would prompt"))
            ),
            (
                "skip after a proven step", [("a", .prove([.biometric, .passcode])), ("b", .open)],
                Proofs.Rules(wanted: 1, leaveOutInvalidated: false, leaveOutNotInteractive: true),
                [.success(.biometric), noUI],
                Run(asked: [.biometric, .passcode], accepted: ["b"], waited: true)
            ),
            ("no candidates", [], all, [], Run(asked: [], accepted: [])),
        ]
        for (why, candidates, rules, answers, expected) in table {
            XCTAssertEqual(run(candidates, rules, answers: answers), expected, why)
        }
    }

    func testADenialStays() {
        var proofs = Proofs([(candidate: "a", plan: .prove([.biometric]))], rules: .every, planned: .unbound)
        _ = proofs.next()
        guard case .denied = proofs.stepEnded(cancel), case .denied(.failed(.userCancel, _)) = proofs.next() else {
            return XCTFail("a denied request stays denied")
        }
    }

    func testStillUsableAfterThePrompt() throws {
        let bound = AccessPlan.Protected(flags: .biometryCurrentSet, protection: .whenUnlocked, enrolmentGeneration: 1)
        let any = AccessPlan.Protected(flags: .biometryAny, protection: .whenUnlocked, enrolmentGeneration: 1)
        let fingerOrPasscode = AccessPlan.Protected(
            flags: [.biometryCurrentSet, .or, .devicePasscode],
            protection: .whenUnlocked,
            enrolmentGeneration: 1
        )
        let same = AccessPlan.UserState(enrolmentGeneration: 1, passcodeEpoch: 0, passcodeSet: true)
        let changed = AccessPlan.UserState(enrolmentGeneration: 2, passcodeEpoch: 0, passcodeSet: true)
        try AccessPlan.stillUsable([bound, any, fingerOrPasscode], planned: same, now: same)
        try AccessPlan.stillUsable([any], planned: same, now: changed)
        XCTAssertThrowsError(try AccessPlan.stillUsable([any, bound], planned: same, now: changed)) {
            XCTAssertEqual($0 as? AccessDenial, .invalidated(.enrolmentChanged))
        }
        // A finger was proven; the enrolled set changed meanwhile, and the plan is now the passcode:
        // the finger may have been the new one.
        XCTAssertThrowsError(try AccessPlan.stillUsable([fingerOrPasscode], planned: same, now: changed)) {
            guard case .failed(.authenticationFailed, _)? = $0 as? AccessDenial else { return XCTFail("\($0)") }
        }
        // Planned after the change already: the passcode was what was proven.
        try AccessPlan.stillUsable([fingerOrPasscode], planned: changed, now: changed)
        XCTAssertEqual(
            AccessPlan.usable(
                ["bound", "any", "either"],
                { ["bound": bound, "any": any, "either": fingerOrPasscode][$0]! },
                planned: same,
                now: changed
            ),
            ["any"]
        )
    }
}
