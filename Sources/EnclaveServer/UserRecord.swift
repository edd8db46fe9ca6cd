import DurableSQLite
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
import Logging

/// Everything the daemon keeps about one user. Written as one row in one durable transaction, so
/// a crash leaves either the old or the new record, never a mix.
struct UserRecord: Sendable, Equatable {
    var uid: UInt32
    var ledger = AttemptLedger()
    var passcode: PasscodeVerifier?
    /// Key for the per-app domain-state HMAC; never leaves the daemon.
    var domainSecret: Data
    /// Counts enrolment changes, so the domain state reflects history (add-then-remove differs).
    var enrolmentGeneration: UInt64 = 0
    /// Enrolled identities as last saved: the truth for the simulated sensor, a cache for a real one.
    var enrolment: [String] = []
    /// Counts passcode removals: Secure Enclave keys bound to "when passcode set" die with it.
    var passcodeEpoch: UInt64 = 0
    /// Wrong login passwords given to lift a disabled passcode (user mode), with their delays.
    var loginPasswordAttempts = PasswordAttempts()
    /// When the daemon last found the enrolled set changed outside it (fprintd-enroll, GNOME
    /// Settings): a change that skipped the passcode rule, which `lactl doctor` reports.
    var enrolmentChangedElsewhereAt: Date?
}

extension UserRecord {
    /// What of this record an older copy would give back (`RollbackCounter`).
    var guarded: RollbackCounter.Guarded {
        RollbackCounter.Guarded(
            passcodeFailures: ledger.passcodeFailures,
            biometryLocked: ledger.biometryLock != nil,
            loginPasswordFailures: loginPasswordAttempts.failures,
            passcode: passcode,
            passcodeEpoch: passcodeEpoch,
            enrolmentGeneration: enrolmentGeneration
        )
    }
}
