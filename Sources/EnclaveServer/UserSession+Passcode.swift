import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging

/// The passcode, enrolment, and lifting the passcode counter: the user's state that only the
/// person changes (asked on the trusted prompt by `PersonSecrets`).
extension UserSession {
    // MARK: Passcode and enrolment

    /// Checks the passcode outside an evaluation (changing it, enrolment). Counts like any attempt.
    private func requirePasscode(_ passcode: String) async throws {
        if let refusal = PasscodeCheck.admit(passcodeSet: passcodeIsSet, ledger: record.ledger, now: clock.monotonic())
        {
            throw refusal.failure
        }
        let (correct, attempt) = try await checkPasscode(passcode)
        let result = PasscodeCheck.record(
            correct: correct,
            attempt: attempt,
            ledger: &record.ledger,
            now: clock.monotonic(),
            wall: clock.wall()
        )
        try await persist()
        if let failure = result.failure { throw failure }
    }

    /// Whether this user's device passcode is their login password, checked through PAM.
    var usesPAM: Bool {
        guard config.pamService != nil else { return false }
        return config.pamUsers.map { $0.contains(username) } ?? true
    }

    /// A PAM user always has a passcode (the login password); else one must have been set.
    var passcodeIsSet: Bool { usesPAM || record.passcode != nil }

    var username: String { accountName(uid: uid) }

    /// Whether `passcode` is right, and the memory-hard digest of the attempt that the ledger uses
    /// to tell a repeated wrong entry from a new one (nil with PAM: its stack decides, and may try a
    /// fingerprint too, so every refusal counts). One check at a time per user: a slow PAM stack
    /// must not let parallel requests guess past the delay rules.
    func checkPasscode(_ passcode: String) async throws -> (correct: Bool, attempt: Data?) {
        guard !passcodeCheckBusy else {
            throw DaemonError(.busy, "another passcode check for this user is in progress")
        }
        passcodeCheckBusy = true
        defer { passcodeCheckBusy = false }
        // The TPM's counter still agrees with this state before anything is checked.
        if let rollback, let refusal = await rollback.verify() { throw DaemonError(.passcodeDisabled, refusal) }
        if usesPAM, let service = config.pamService {
            let user = username
            return try await countedFirst {
                let outcome = await PAMAuthenticator.check(service: service, user: user, password: passcode)
                if case .unsuitable(let why) = outcome { throw DaemonError(.notPermitted, why) }
                if case .refused(let why) = outcome {
                    self.logger.notice(
                        "PAM refused the login password",
                        metadata: ["uid": "\(self.uid)", "pam": "\(why)"]
                    )
                }
                return (outcome == .accepted, nil)
            }
        }
        guard let verifier = record.passcode else { throw DaemonError(.passcodeNotSet, "no device passcode is set") }
        let (key, prior) = (keys.passcode, keys.priorPasscode)
        let attempt = try await BlockingWork.compute { try verifier.derive(passcode, key: key, prior: prior) }
        // A repeat of the last wrong entry is wrong again, and not counted (its result is known):
        // told apart before any count, so repeating it moves no counter.
        if record.ledger.repeatsLastWrongEntry(attempt) { return (false, attempt) }
        return try await countedFirst {
            // Changed or removed while scrypt ran: the old one checks nothing.
            guard self.record.passcode == verifier else {
                throw DaemonError(.busy, "the device passcode changed during the check; try again")
            }
            let correct = verifier.matches(attempt)
            if correct { await self.refresh(verifier, knowing: passcode) }
            return (correct, attempt)
        }
    }

    /// On the TPM root an entry is counted, and the counter moved, before its result is known (as
    /// Android's Gatekeeper counts first): neither the disk nor an answer cut short tells the result
    /// while the counter still stands where a copy of the state could be put back. The count stays
    /// while `check` runs (a save meanwhile keeps it); at the answer it is taken back, and the
    /// caller — with no suspension between — records the result as for any entry and saves, which
    /// never moves the counter again. Anywhere else the check runs as is.
    private func countedFirst(
        _ check: () async throws -> (correct: Bool, attempt: Data?)
    ) async throws -> (correct: Bool, attempt: Data?) {
        guard rollback != nil else { return try await check() }
        let pending = record.ledger.countPasscodeEntryFirst(now: clock.monotonic(), wall: clock.wall())
        let counted = record.ledger
        do { try await persist() } catch {
            // Counted on the disk but the counter did not follow: nothing was checked, so the
            // count goes (a failed write left the record as it was).
            if record.ledger == counted {
                record.ledger.takeBack(pending)
                try? await persist()
            }
            throw error
        }
        do {
            let result = try await check()
            record.ledger.takeBack(pending)
            return result
        } catch {
            // Not a guess after all (PAM unsuitable, the passcode removed meanwhile).
            record.ledger.takeBack(pending)
            try? await persist()
            throw error
        }
    }

    /// After a right passcode: a verifier weaker than today's cost, not keyed (one from before), or
    /// moved from the software root, is remade at that cost, keyed under today's key alone; the
    /// passcode's length is noted if it was not. The change becomes durable with the success the
    /// caller saves next; a failure to remake leaves the old verifier working.
    private func refresh(_ verifier: PasscodeVerifier, knowing passcode: String) async {
        var next = verifier
        let key = keys.passcode
        if verifier.needsUpgrade(toCost: config.passcodeCost) || !verifier.isKeyed || verifier.priorKeyed == true {
            // Never below the cost it had: keying must not weaken it.
            let cost = max(config.passcodeCost, verifier.cost)
            guard
                let remade = try? await BlockingWork.compute({
                    try PasscodeVerifier.remade(passcode: passcode, cost: cost, key: key)
                })
            else { return }
            next = remade
            logger.info(
                "passcode verifier remade",
                metadata: [
                    "uid": "\(uid)", "from": "\(verifier.cost)", "to": "\(cost)", "keyed": "\(verifier.isKeyed) → true",
                    "moved": "\(verifier.priorKeyed == true)",
                ]
            )
        }
        if next.length(key: key) == nil { try? next.noteLength(passcode.count, key: key) }
        // The passcode may have changed while scrypt ran.
        if next != verifier, record.passcode == verifier { record.passcode = next }
    }

    /// The passcode as a gate for another request (the full audit log). Counts like any attempt.
    func confirmPasscode(_ passcode: String) async throws { try await requirePasscode(passcode) }

    func setPasscode(current: String?, new: String) async throws {
        if usesPAM {
            throw DaemonError(
                .notPermitted,
                "the device passcode is your login password (PAM service \(config.pamService ?? "")); change it with passwd"
            )
        }
        do { try PasscodeVerifier.validate(new, minimumLength: config.passcodeMinimumLength) } catch {
            throw DaemonError(.invalidParameter, "\(error)")
        }
        if record.passcode != nil {
            guard let current else {
                throw DaemonError(.passcodeAlreadySet, "a passcode is set; changing it needs the current passcode")
            }
            try await requirePasscode(current)
        }
        let (cost, minimum, key) = (config.passcodeCost, config.passcodeMinimumLength, keys.passcode)
        record.passcode = try await BlockingWork.compute {
            try PasscodeVerifier.make(passcode: new, cost: cost, minimumLength: minimum, key: key)
        }
        record.ledger.passcodeChanged(wall: clock.wall())
        try await persist()
    }

    /// Removing the passcode also removes every enrolled identity (behavior.md §4).
    func removePasscode(current: String) async throws {
        // One enrolment change at a time: the sensor call suspends, and a second change must not
        // start from the list the first is replacing.
        guard !enrolmentBusy else { throw DaemonError(.busy, "another enrolment change is in progress") }
        enrolmentBusy = true
        defer { enrolmentBusy = false }
        if usesPAM {
            throw DaemonError(
                .notPermitted,
                "the device passcode is your login password (PAM service \(config.pamService ?? "")); it cannot be removed here"
            )
        }
        try await requirePasscode(current)
        if let sensor, !record.enrolment.isEmpty {
            record.enrolment = try await sensor.unenrollAll(uid: uid, stored: record.enrolment)
            record.enrolmentGeneration += 1
        }
        record.passcode = nil
        record.passcodeEpoch += 1
        record.ledger.passcodeRemoved()
        // Items and keys that exist only while a passcode is set go with it, with their class key,
        // in the record's own transaction.
        classKeys[.passcodeSet] = nil
        var removed = 0
        try await persist { db, record in
            removed = try Storage.removePasscodeClass(uid: record.uid, db)
            try Storage.write(record, audit: [], db)
        }
        storage.shred()
        if removed > 0 {
            logger.info("removed passcode-bound keychain items", metadata: ["uid": "\(uid)", "count": "\(removed)"])
        }
    }

    func enroll(
        passcode: String,
        name: String,
        progress: @escaping @Sendable (EnrolmentProgress) -> Void = { _ in }
    ) async throws {
        // One enrolment change at a time: the sensor call suspends, and a second change must not
        // start from the list the first is replacing.
        guard !enrolmentBusy else { throw DaemonError(.busy, "another enrolment change is in progress") }
        enrolmentBusy = true
        defer { enrolmentBusy = false }
        guard let sensor else { throw DaemonError(.noSensor, "there is no biometric sensor to enrol on") }
        try Request.Enroll(name: name).validate()
        try await requirePasscode(passcode)
        record.enrolment = try await sensor.enroll(uid: uid, name: name, stored: record.enrolment, progress: progress)
        record.enrolmentGeneration += 1
        try await persist()
    }

    /// The enrolled identities' names: the person's to see, with the passcode.
    func enrolments(passcode: String) async throws -> [String] {
        try await confirmPasscode(passcode)
        return try await identities()
    }

    func unenroll(passcode: String, name: String) async throws {
        // One enrolment change at a time: the sensor call suspends, and a second change must not
        // start from the list the first is replacing.
        guard !enrolmentBusy else { throw DaemonError(.busy, "another enrolment change is in progress") }
        enrolmentBusy = true
        defer { enrolmentBusy = false }
        guard let sensor else { throw DaemonError(.noSensor, "there is no biometric sensor") }
        try await requirePasscode(passcode)
        record.enrolment = try await sensor.unenroll(uid: uid, name: name, stored: record.enrolment)
        record.enrolmentGeneration += 1
        try await persist()
    }

    // MARK: Administration

    func resetPasscodeLockout() async throws {
        record.ledger.administratorReset()
        try await persist()
    }

    /// The person lifts the disabled passcode with the login password, checked through PAM
    /// (`loginPasswordService`). Its wrong guesses have a counter and delays of their own
    /// (`PasswordAttempts`), stored before the answer leaves; during a delay nothing is checked.
    /// Where the passcode *is* the login password (PAM), this path would be a second counter on the
    /// same secret: refused, root lifts it. The attempt is counted before PAM answers (a client
    /// that kills the daemon when a wrong answer is slow to come loses nothing by it) and forgiven
    /// on success.
    func resetPasscodeLockout(loginPassword password: String) async throws {
        if usesPAM {
            throw DaemonError(
                .notPermitted,
                "your device passcode is your login password: its counter is lifted by root (sudo lactl admin reset-passcode --uid \(uid))"
            )
        }
        switch try await checkLoginPassword(password) {
        case .accepted:
            record.ledger.administratorReset()
            try await persist()
        case .wrong:
            throw DaemonError(
                .passcodeIncorrect,
                "the login password is not correct (\(record.loginPasswordAttempts.failures) in a row)"
            )
        case .delayed(let wait):
            throw DaemonError(
                .passcodeRetryLater,
                "login password entry is delayed after \(record.loginPasswordAttempts.failures) wrong ones; try again in \(Int(wait.rounded(.up))) s",
                retryAfter: wait
            )
        }
    }

    /// The login password, checked through PAM (`loginPasswordService`) on a counter of its own
    /// (`PasswordAttempts`): lifting a disabled passcode in user mode, and a PAM authentication's
    /// password (`pam_laenclave`). Counted and saved before PAM is asked (a client that kills the
    /// daemon when a wrong answer is slow to come loses nothing by it), forgiven on success; during
    /// a delay nothing is checked.
    func checkLoginPassword(_ password: String) async throws -> EvaluationMachine.LoginPasswordCheck {
        guard !loginCheckBusy else { throw DaemonError(.busy, "another login password check of this user is running") }
        loginCheckBusy = true
        defer { loginCheckBusy = false }
        // Its counter is in the state too: a state put back would hand out fresh guesses.
        if let rollback, let refusal = await rollback.verify() { throw DaemonError(.passcodeDisabled, refusal) }
        if let wait = record.loginPasswordAttempts.retryAfter(now: clock.wall()) { return .delayed(wait) }
        let before = record.loginPasswordAttempts
        record.loginPasswordAttempts.recordFailure(now: clock.wall())
        try await persist()
        switch await PAMAuthenticator.check(service: config.loginPasswordService, user: username, password: password) {
        case .accepted:
            record.loginPasswordAttempts = PasswordAttempts()
            try await persist()
            return .accepted
        case .refused(let why):
            logger.notice("PAM refused the login password", metadata: ["uid": "\(uid)", "pam": "\(why)"])
            return .wrong(retryAfter: record.loginPasswordAttempts.retryAfter(now: clock.wall()))
        case .unsuitable(let why):
            record.loginPasswordAttempts = before
            try await persist()
            throw DaemonError(.notPermitted, why)
        }
    }

    func remoteLock() async throws {
        record.ledger.remoteLock()
        try await persist()
    }
}
