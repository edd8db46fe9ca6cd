import EnclaveCore
import EnclaveProtocol

extension EvaluationRunner {
    /// The answer to `.checkPasscode`: the device passcode's, or the login password's on its own counter.
    func check(_ passcode: String, on session: isolated UserSession) async -> EvaluationMachine.Input {
        do {
            if secret == .loginPassword { return .loginPasswordChecked(try await session.checkLoginPassword(passcode)) }
            let (correct, attempt) = try await session.checkPasscode(passcode)
            return .passcodeChecked(correct: correct, attempt: attempt)
        } catch let error as DaemonError where Self.cancelsTheCheck.contains(error.code) {
            return .systemCancel(error.message)
        } catch let error as DaemonError where error.code == .passcodeNotSet {
            return .systemCancel("The device passcode was removed during the evaluation.")
        } catch {
            session.logger.error("a passcode check failed", metadata: ["uid": "\(session.uid)", "error": "\(error)"])
            return .systemCancel("The enclave could not check the passcode.")
        }
    }

    /// Why a passcode check may not run, said to the person as the evaluation's end.
    private static let cancelsTheCheck: Set<DaemonError.Code> = [
        .busy, .notPermitted, .passcodeDisabled, .stateNotSaved, .rollbackCounterNotMoved,
    ]
}
