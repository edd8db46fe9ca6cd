import EnclaveCore
import EnclaveProtocol
@testable import EnclaveServer
import XCTest

/// `AccessProver`: plan → prove each step on the context → plan again after the prompt.
final class AccessProverTests: XCTestCase {
    /// The user's state as successive reads see it, and the steps the authorizer was asked for.
    private final class Script: @unchecked Sendable {
        var states: [AccessPlan.UserState]
        var reads = 0
        var asked: [EvaluationStep] = []
        var answer: EvaluationMachine.Outcome = .success(.biometric)
        init(_ states: [AccessPlan.UserState]) { self.states = states }
        func read() -> AccessPlan.UserState {
            defer { reads += 1 }
            return states[min(reads, states.count - 1)]
        }
    }

    private func state(_ enrolment: UInt64, passcode: Bool = true) -> AccessPlan.UserState {
        AccessPlan.UserState(enrolmentGeneration: enrolment, passcodeEpoch: 0, passcodeSet: passcode)
    }

    private func prover(_ script: Script) -> AccessProver {
        AccessProver(state: { script.read() }, authorize: { step, _, _ in
            script.asked.append(step)
            return script.answer
        })
    }

    private func denial(_ prover: AccessProver, _ protected: AccessPlan.Protected) async -> AccessDenial? {
        do throws(AccessDenial) { try await prover.prove(protected, reason: "r", noUI: false); return nil } catch { return error }
    }

    func testProvesEveryStepInOrder() async {
        let script = Script([state(1)])
        let denied = await denial(prover(script), .init(flags: [.biometryAny, .devicePasscode], protection: .whenUnlocked, enrolmentGeneration: 1))
        XCTAssertNil(denied)
        XCTAssertEqual(script.asked, [.biometric, .passcode])
        XCTAssertEqual(script.reads, 2, "the state is read before and after the prompt")
    }

    func testAFailedStepEndsTheProofWithItsCode() async {
        let script = Script([state(1)])
        script.answer = .failure(.userCancel, "cancelled")
        let denied = await denial(prover(script), .init(flags: [.biometryAny, .devicePasscode], protection: .whenUnlocked, enrolmentGeneration: 1))
        XCTAssertEqual(denied, .failed(.userCancel, "cancelled"))
        XCTAssertEqual(script.asked, [.biometric], "no second step after a failure")
    }

    func testAnEnrolmentChangeWhileThePromptIsOpenInvalidates() async {
        let script = Script([state(1), state(2)])
        let denied = await denial(prover(script), .init(flags: .biometryCurrentSet, protection: .whenUnlocked, enrolmentGeneration: 1))
        XCTAssertEqual(denied, .invalidated(.enrolmentChanged))
        XCTAssertEqual(script.asked, [.biometric], "proven, then found invalid")
    }

    func testAnInvalidatedItemNeverPrompts() async {
        let script = Script([state(2)])
        let denied = await denial(prover(script), .init(flags: .biometryCurrentSet, protection: .whenUnlocked, enrolmentGeneration: 1))
        XCTAssertEqual(denied, .invalidated(.enrolmentChanged))
        XCTAssertEqual(script.asked, [])
    }

    func testNoConstraintOpensWithoutAPrompt() async {
        let script = Script([state(1)])
        let denied = await denial(prover(script), .init(flags: .privateKeyUsage, protection: .whenUnlocked, enrolmentGeneration: 1))
        XCTAssertNil(denied)
        XCTAssertEqual(script.asked, [])
    }

    func testAnUnboundAccessControlReadsNoState() async {
        let script = Script([state(1)])
        let denied = await denial(prover(script), .init(flags: .biometryCurrentSet, protection: nil, enrolmentGeneration: nil))
        XCTAssertNil(denied)
        XCTAssertEqual(script.asked, [.biometric])
        XCTAssertEqual(script.reads, 0, "evaluateAccessControl depends on no stored state")
    }

    func testAStateThatCannotBeReadIsUnavailable() async {
        let failing = AccessProver(state: { throw Failure(.internalError, "disk") }, authorize: { _, _, _ in .success(.biometric) })
        let denied = await denial(failing, .init(flags: .biometryAny, protection: .whenUnlocked, enrolmentGeneration: 1))
        guard case .unavailable? = denied else { return XCTFail("\(String(describing: denied))") }
    }

    func testEachSurfaceMapsADenialOnce() {
        XCTAssertEqual(KeychainFailure(.failed(.userCancel, "")).status, .userCanceled)
        XCTAssertEqual(KeychainFailure(.failed(.systemCancel, "")).status, .userCanceled)
        XCTAssertEqual(KeychainFailure(.failed(.notInteractive, "")).status, .interactionNotAllowed)
        XCTAssertEqual(KeychainFailure(.failed(.authenticationFailed, "")).status, .authFailed)
        XCTAssertEqual(KeychainFailure(.invalidated(.enrolmentChanged)).status, .invalidItemRef)
        XCTAssertEqual(KeychainFailure(.unavailable("x")).status, .notAvailable)
        XCTAssertEqual(KeyReply(.invalidated(.passcodeRemoved)).problem, .invalidated)
        XCTAssertEqual(KeyReply(.failed(.biometryLockout, "")).authenticationError, .biometryLockout)
        XCTAssertEqual(EvaluationResult(.failed(.userFallback, "f"), biometryType: .touchID).error, .userFallback)
    }
}
