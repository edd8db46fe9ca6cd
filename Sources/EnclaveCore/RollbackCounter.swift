/// Counters that cannot go back (issue 31, item 3): on a TPM root the state carries a generation
/// that a TPM NV counter follows, so a copy of the state directory put back later (fewer wrong
/// passcodes, an old passcode, an old enrolment) is older than the counter and refused.
///
/// The order of a change that must never roll back, write-ahead: the state at generation + 1 is
/// durable first, then the counter moves, then the answer leaves. A daemon stopped between the two
/// finds its state ahead of the counter (by as many moves as were in flight, one per user's
/// change at most) and finishes the moves: only this state's key seals a generation, so a state
/// ahead was written by this daemon. Anything else out of step is a state that was put back, or a
/// counter that was deleted or moved by someone else.
///
/// Our choices: the counter moves only for the changes below (a real TPM's NV wears out: a few
/// dozen writes a day, nothing on a biometric match, an evaluation reused or a keychain call). A
/// passcode check is counted as a failure first, moving the counter, then checked (as Android's
/// Gatekeeper does), so neither the disk nor an answer cut short tells its result while a copy of
/// the state could still be put back: a right passcode moves it once too. A save that only
/// forgives (a success, an administrator's reset) keeps the generation, so a copy from just before
/// it gives back only what it forgave. Biometric failures short of the lockout do not move it: in
/// system mode a state put back from another boot locks biometrics until the passcode
/// (`AttemptLedger.noteLoaded`), as Apple's volatile biometric counters do.
public enum RollbackCounter {
    /// What of one user's record an older copy would give back to someone guessing.
    public struct Guarded: Equatable, Sendable {
        public var passcodeFailures: Int
        public var biometryLocked: Bool
        public var loginPasswordFailures: Int
        /// The verifier as stored: set, changed, removed or remade.
        public var passcode: PasscodeVerifier?
        public var passcodeEpoch: UInt64
        public var enrolmentGeneration: UInt64

        public init(
            passcodeFailures: Int = 0,
            biometryLocked: Bool = false,
            loginPasswordFailures: Int = 0,
            passcode: PasscodeVerifier? = nil,
            passcodeEpoch: UInt64 = 0,
            enrolmentGeneration: UInt64 = 0
        ) {
            self.passcodeFailures = passcodeFailures
            self.biometryLocked = biometryLocked
            self.loginPasswordFailures = loginPasswordFailures
            self.passcode = passcode
            self.passcodeEpoch = passcodeEpoch
            self.enrolmentGeneration = enrolmentGeneration
        }
    }

    /// Whether saving `new` over `old` (nil: the user's first record) must move the counter before
    /// anyone learns of it: a wrong passcode or login password counted, a biometric lockout or
    /// remote lock, a passcode set, changed, removed or remade, an enrolment change. Successes,
    /// an administrator's reset and everything else keep the generation.
    public static func mustAdvance(from old: Guarded?, to new: Guarded) -> Bool {
        let old = old ?? Guarded()
        return new.passcodeFailures > old.passcodeFailures
            || new.loginPasswordFailures > old.loginPasswordFailures
            || (new.biometryLocked && !old.biometryLocked)
            || new.passcode != old.passcode
            || new.passcodeEpoch != old.passcodeEpoch
            || new.enrolmentGeneration != old.enrolmentGeneration
    }

    /// How the state stands against the TPM's counter.
    public enum Standing: Equatable, Sendable {
        case inStep
        /// The state is ahead by this many moves: changes were made durable and the daemon stopped
        /// before the counter followed. Move it, then serve.
        case finishMove(UInt64)
        /// Passcode checks and biometrics are refused for every user until root's recovery
        /// (`laenclaved --reanchor`): why.
        case refused(String)
    }

    /// `counter`: the TPM's value, nil when its index is gone. `anchorIntact`: whether the users'
    /// records are the ones the state's generation was sealed with (none swapped for an older one).
    public static func standing(generation: UInt64, counter: UInt64?, anchorIntact: Bool) -> Standing {
        guard anchorIntact else {
            return .refused(
                "the users' records are not the ones this state's generation was sealed with (a record put back from an older copy?)"
            )
        }
        guard let counter else {
            return .refused(
                "the TPM's rollback counter for this state is gone (deleted by whoever owns the TPM, or the TPM was cleared)"
            )
        }
        if generation == counter { return .inStep }
        if generation > counter, generation - counter <= maximumCatchUp { return .finishMove(generation - counter) }
        if generation < counter {
            return .refused(
                "this state is older than the TPM's rollback counter (state \(generation), counter \(counter)): a copy of the state directory was put back"
            )
        }
        return .refused(
            "this state is ahead of the TPM's rollback counter (state \(generation), counter \(counter)): the counter was replaced"
        )
    }

    /// The most moves a stop can leave unfinished (one per user's change in flight): a state further
    /// ahead is refused rather than wear the TPM.
    public static let maximumCatchUp: UInt64 = 256

    /// What a refusal that waits for the TPM ends with.
    public static let untilTheTPMAnswers =
        "passcode checks and biometrics wait until the TPM answers again (looked at on the next request)"

    /// What every refusal ends with: the way back.
    public static let recovery =
        "passcode checks and biometrics are refused for every user until root accepts this state (laenclaved --reanchor: docs/architecture.md, “Counters that cannot go back”)"
}
