import EnclaveCore
import EnclaveProtocol

extension EvaluationRunner {
    /// The answer to `.checkPasscode`: the device passcode's, or the login password's on its own counter.
    func check(_ passcode: String, on session: isolated UserSession) async -> EvaluationMachine.Input {
        do {
            if secret == .loginPassword { return .loginPasswordChecked(try await session.checkLoginPassword(passcode)) }
            let (correct, attempt) = try await session.checkPasscode(passcode)
            return .passcodeChecked(correct: correct, attempt: attempt)
        } catch let f as Failure where [.busy, .notPermitted, .passcodeDisabled, .internalError].contains(f.code) {
            return .systemCancel(f.message)
        } catch {
            return .systemCancel("The device passcode was removed during the evaluation.")
        }
    }
}
