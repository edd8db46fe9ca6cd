import EnclaveProtocol
import Foundation

/// One passcode entry, inside an evaluation (`EvaluationMachine`) or outside it (changing the
/// passcode, enrolment, the full audit log): whether it may be checked now, and what the check's
/// result does to the ledger. The check itself (scrypt or PAM) is the shell's.
public enum PasscodeCheck {
    /// Why an entry is not even checked: it is not counted either.
    public enum Refusal: Equatable, Sendable {
        case notSet
        case retryLater(seconds: Double)
        case disabled

        /// The answer outside an evaluation.
        public var failure: Failure {
            switch self {
            case .notSet: return Failure(.passcodeNotSet, "no device passcode is set")
            case .retryLater(let s):
                return Failure(
                    .passcodeRetryLater,
                    "passcode entry is delayed; try again in \(Int(s.rounded(.up))) s",
                    retryAfter: s
                )
            case .disabled:
                return Failure(.passcodeDisabled, "passcode entry is disabled until an administrator resets it")
            }
        }
    }

    public enum Result: Equatable, Sendable {
        case accepted
        /// Counted (unless it repeats the last wrong entry of our own verifier); `retryAfter` when
        /// entry is now delayed.
        case incorrect(retryAfter: Double?)

        /// The answer outside an evaluation: nil when accepted.
        public var failure: Failure? {
            guard case .incorrect(let retryAfter) = self else { return nil }
            return Failure(.passcodeIncorrect, "the passcode is not correct", retryAfter: retryAfter)
        }
    }

    /// Whether an entry may be checked now.
    public static func admit(passcodeSet: Bool, ledger: AttemptLedger, now: MonotonicStamp) -> Refusal? {
        guard passcodeSet else { return .notSet }
        switch ledger.passcodeGate(now: now) {
        case .open: return nil
        case .wait(let seconds): return .retryLater(seconds: seconds)
        case .disabled: return .disabled
        }
    }

    /// Records a checked entry; the ledger must then be saved before anyone learns the result.
    public static func record(
        correct: Bool,
        attempt: Data?,
        ledger: inout AttemptLedger,
        now: MonotonicStamp,
        wall: Date
    ) -> Result {
        if correct {
            ledger.recordPasscodeSuccess(wall: wall)
            return .accepted
        }
        ledger.recordPasscodeFailure(attempt: attempt, now: now, wall: wall)
        if case .wait(let seconds) = ledger.passcodeGate(now: now) { return .incorrect(retryAfter: seconds) }
        return .incorrect(retryAfter: nil)
    }
}
