import EnclaveCore
import EnclaveProtocol

/// A PAM authentication's view of the user's state, read once before its prompt.
extension UserSession {
    struct PAMStanding: Sendable {
        /// A reader and an enrolled finger: the finger can be offered at all.
        var fingerReady: Bool
        /// The finger is locked out (failures, boot, inactivity, a remote lock).
        var biometryRefused: Bool
        /// Whether the password may be checked now, on the counter that counts it.
        var password: PasscodeGate
        /// What a typed password is: the device passcode where it is the login password, else the
        /// login password on its own counter.
        var secret: EvaluationMachine.Secret
        /// Why nothing is checked for anyone (a rollback refusal): the module steps aside — an error
        /// of the daemon's is never a lockout.
        var refusal: String?
    }

    func pamStanding() async throws -> PAMStanding {
        let facts = try await facts()
        let secret: EvaluationMachine.Secret = usesPAM ? .devicePasscode : .loginPassword
        let gate: PasscodeGate
        if secret == .devicePasscode {
            gate = record.ledger.passcodeGate(now: clock.monotonic())
        } else {
            gate = record.loginPasswordAttempts.retryAfter(now: clock.wall()).map { .wait(seconds: $0) } ?? .open
        }
        return PAMStanding(
            fingerReady: facts.sensor != .none && facts.enrolled,
            biometryRefused: record.ledger.biometryRefusal(now: clock.wall()) != nil,
            password: gate,
            secret: secret,
            refusal: facts.stateRefusal
        )
    }
}
