/// What a typed passcode is in an evaluation: the device passcode (an app's), or the login password
/// (a PAM authentication's, `PAMAuthenticationRules`), which the shell checks through PAM and
/// counts on a counter of its own (`PasswordAttempts`), never the ledger's.
extension EvaluationMachine {
    public enum Secret: Sendable, Equatable { case devicePasscode, loginPassword }

    /// The shell's answer to `.checkPasscode` of a login password, counted on its own counter.
    public enum LoginPasswordCheck: Sendable, Equatable {
        case accepted
        /// Counted; `retryAfter` when entry is now delayed.
        case wrong(retryAfter: Double?)
        /// Not checked, not counted: entry is delayed this long.
        case delayed(Double)
    }
}
