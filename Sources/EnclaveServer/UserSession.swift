import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging

/// Everything about one user, serialized: the ledger, the passcode, enrolment, the scripted
/// person's script (`PersonScript`) and the one prompt at a time. Every change is saved before the caller answers.
actor UserSession {
    let uid: UInt32
    let storage: Storage
    let sensor: (any BiometricSensor)?
    let config: DaemonConfiguration
    let clock: any EnclaveClock
    let logger: Logger
    var record: UserRecord
    /// The record as it is on disk: what `record` returns to when a save fails, so no answer or
    /// status ever reflects a change that was not made durable.
    private var saved: UserRecord
    private var enrolmentBusy = false
    private var passcodeCheckBusy = false
    private var loginCheckBusy = false
    private var script = PersonScript()
    private var prompt = PromptQueue()
    /// The running evaluation's inputs, while this user's prompt is open.
    var activeInputs: AsyncStream<SessionInput>.Continuation?
    /// The app whose prompt is open: only it is told so (`UserStatus.promptOpen`).
    var activePromptApp: String?

    /// What the master key derives for this user (`KeyHierarchy`).
    let keys: UserKeys
    /// The user's class keys once read (or made); a destroyed one leaves at once.
    private var classKeys: [KeyClass: SymmetricKey] = [:]
    private var domainStates = DomainStateMemo()
    /// The daemon's graceful stop has begun: evaluations ended from outside answer systemCancel.
    let stopping: StopFlag
    /// Certifies this user's Secure Enclave keys (`KeyRequest.Operation.attest`).
    let attestor: KeyAttestor?

    init(uid: UInt32, storage: Storage, sensor: (any BiometricSensor)?, config: DaemonConfiguration, clock: any EnclaveClock, logger: Logger,
         stopping: StopFlag = StopFlag(), attestor: KeyAttestor?, keys: UserKeys) throws {
        self.uid = uid; self.storage = storage; self.sensor = sensor; self.config = config; self.clock = clock; self.logger = logger
        self.stopping = stopping; self.attestor = attestor
        self.keys = keys
        let loaded = try storage.loadUser(uid)
        var r = loaded ?? UserRecord(uid: uid, domainSecret: DomainStateHash.newSecret())
        let changed = r.ledger.noteLoaded(now: clock.monotonic(), lockBiometryOnBoot: config.mode == .system, wall: clock.wall())
        if loaded == nil || changed { try storage.save(r) }
        record = r
        saved = r
    }

    /// The user's key of `keyClass`, made on first use. The `passcodeSet` class exists only while
    /// a passcode is set: a request that waited on a prompt while the passcode was removed finds
    /// no key, rather than making one that would outlive the removal.
    func classKey(_ keyClass: KeyClass) throws -> SymmetricKey {
        if keyClass == .passcodeSet && !passcodeIsSet { throw KeychainFailure(CreationProblem.passcodeNeeded) }
        if let key = classKeys[keyClass] { return key }
        let key = try storage.classKey(uid: uid, keyClass, wrappingKey: keys.wrapping)
        classKeys[keyClass] = key
        return key
    }

    /// Makes the current record durable (with the audit entries of its change), or returns to the
    /// last durable one and throws.
    func persist(audit: [AuditEntry] = []) throws {
        do {
            try storage.save(record, audit: audit)
            saved = record
        } catch {
            record = saved
            logger.error("could not save the user's record", metadata: ["uid": "\(uid)", "error": "\(error)"])
            throw Failure(.internalError, "the enclave could not save its state")
        }
    }

    // MARK: Facts

    func identities() async throws -> [String] {
        guard let sensor else { return [] }
        let stored = record.enrolment
        let now = try await sensor.enrolledIdentities(uid: uid, stored: stored)
        if EnrolmentSet.changed(from: stored, to: now) {
            // A real sensor's set changed behind our back: that is an enrolment change too, and one
            // that skipped the passcode rule (lactl doctor says so).
            record.enrolment = now
            record.enrolmentGeneration += 1
            record.enrolmentChangedElsewhereAt = clock.wall()
            logger.notice("the enrolled set was changed outside laenclaved", metadata: ["uid": "\(uid)", "identities": "\(now.count)"])
            try persist()
        }
        return now
    }

    func facts() async throws -> DeviceFacts {
        DeviceFacts(sensor: sensor?.info.kind ?? .none, enrolled: !(try await identities()).isEmpty, passcodeSet: passcodeIsSet)
    }

    func domainState(app: String) async throws -> Data? {
        let ids = try await identities()
        return domainStates.hash(secret: record.domainSecret, app: app, sensor: sensor?.info.name ?? "",
                                 generation: record.enrolmentGeneration, identities: ids)
    }

    // MARK: Queries

    func canEvaluate(policy: PolicyValue, app: String) async throws -> CanEvaluateReply {
        let f = try await facts()
        let problem = Preflight.check(policy, facts: f, ledger: record.ledger, wall: clock.wall())
        let state = problem == nil && policy == .deviceOwnerAuthenticationWithBiometrics ? try await domainState(app: app) : nil
        return CanEvaluateReply(biometryType: f.sensor, error: problem?.0, message: problem?.1, domainState: state)
    }

    func status(app: String) async throws -> UserStatus {
        let ids = try await identities()
        let now = clock.monotonic()
        var retryAfter: Double?
        var disabled = false
        switch record.ledger.passcodeGate(now: now) {
        case .open: break
        case .wait(let s): retryAfter = s
        case .disabled: disabled = true
        }
        return UserStatus(
            uid: uid, mode: config.mode, app: app, sensor: sensor?.info, enrolledCount: ids.count, passcodeSet: passcodeIsSet,
            biometricFailures: record.ledger.biometricFailures, biometryLockout: record.ledger.biometryRefusal(now: clock.wall())?.rawValue,
            passcodeFailures: record.ledger.passcodeFailures, passcodeRetryAfter: retryAfter, passcodeDisabled: disabled,
            queuedEvents: script.count, domainState: try await domainState(app: app), simulationEnabled: config.simulationEnabled,
            promptOpen: activePromptApp == app, passcodeMinimumLength: usesPAM ? nil : config.passcodeMinimumLength,
            passcodeShorterThanMinimum: usesPAM ? nil : record.passcode?.length.map { $0 < config.passcodeMinimumLength },
            enrolmentChangedElsewhereAt: record.enrolmentChangedElsewhereAt?.timeIntervalSince1970)
    }

    // MARK: Passcode and enrolment

    /// Checks the passcode outside an evaluation (changing it, enrolment). Counts like any attempt.
    private func requirePasscode(_ passcode: String) async throws {
        if let refusal = PasscodeCheck.admit(passcodeSet: passcodeIsSet, ledger: record.ledger, now: clock.monotonic()) { throw refusal.failure }
        let (correct, attempt) = try await checkPasscode(passcode)
        let result = PasscodeCheck.record(correct: correct, attempt: attempt, ledger: &record.ledger, now: clock.monotonic(), wall: clock.wall())
        try persist()
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
        guard !passcodeCheckBusy else { throw Failure(.busy, "another passcode check for this user is in progress") }
        passcodeCheckBusy = true
        defer { passcodeCheckBusy = false }
        if usesPAM, let service = config.pamService {
            let outcome = await PAMAuthenticator.check(service: service, user: username, password: passcode)
            if case .unsuitable(let why) = outcome { throw Failure(.notPermitted, why) }
            if case .refused(let why) = outcome { logger.notice("PAM refused the login password", metadata: ["uid": "\(uid)", "pam": "\(why)"]) }
            return (outcome == .accepted, nil)
        }
        guard let verifier = record.passcode else { throw Failure(.passcodeNotSet, "no device passcode is set") }
        let attempt = try await BlockingWork.compute { try verifier.derive(passcode) }
        let correct = verifier.matches(attempt)
        if correct { await refresh(verifier, knowing: passcode) }
        return (correct, attempt)
    }

    /// After a right passcode: a verifier weaker than today's cost is remade at it, and the
    /// passcode's length is noted if it was not. The change becomes durable with the success the
    /// caller saves next; a failure to remake leaves the old verifier working.
    private func refresh(_ verifier: PasscodeVerifier, knowing passcode: String) async {
        var next = verifier
        if verifier.needsUpgrade(toCost: config.passcodeCost) {
            let cost = config.passcodeCost
            guard let remade = try? await BlockingWork.compute({ try PasscodeVerifier.remade(passcode: passcode, cost: cost) }) else { return }
            next = remade
            logger.info("passcode verifier upgraded", metadata: ["uid": "\(uid)", "from": "\(verifier.cost)", "to": "\(cost)"])
        }
        next.length = passcode.count
        // The passcode may have changed while scrypt ran.
        if next != verifier, record.passcode == verifier { record.passcode = next }
    }

    /// The passcode as a gate for another request (the full audit log). Counts like any attempt.
    func confirmPasscode(_ passcode: String) async throws { try await requirePasscode(passcode) }

    func setPasscode(current: String?, new: String) async throws {
        if usesPAM { throw Failure(.notPermitted, "the device passcode is your login password (PAM service \(config.pamService ?? "")); change it with passwd") }
        do { try PasscodeVerifier.validate(new, minimumLength: config.passcodeMinimumLength) } catch { throw Failure(.invalidParameter, "\(error)") }
        if record.passcode != nil {
            guard let current else { throw Failure(.passcodeAlreadySet, "a passcode is set; changing it needs the current passcode") }
            try await requirePasscode(current)
        }
        let (cost, minimum) = (config.passcodeCost, config.passcodeMinimumLength)
        record.passcode = try await BlockingWork.compute { try PasscodeVerifier.make(passcode: new, cost: cost, minimumLength: minimum) }
        record.ledger.passcodeChanged(wall: clock.wall())
        try persist()
    }

    /// Removing the passcode also removes every enrolled identity (behavior.md §4).
    func removePasscode(current: String) async throws {
        // One enrolment change at a time: the sensor call suspends, and a second change must not
        // start from the list the first is replacing.
        guard !enrolmentBusy else { throw Failure(.busy, "another enrolment change is in progress") }
        enrolmentBusy = true
        defer { enrolmentBusy = false }
        if usesPAM { throw Failure(.notPermitted, "the device passcode is your login password (PAM service \(config.pamService ?? "")); it cannot be removed here") }
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
        do {
            let removed = try storage.removePasscodeClass(saving: record)
            saved = record
            if removed > 0 { logger.info("removed passcode-bound keychain items", metadata: ["uid": "\(uid)", "count": "\(removed)"]) }
        } catch {
            record = saved
            logger.error("could not remove the passcode", metadata: ["uid": "\(uid)", "error": "\(error)"])
            throw Failure(.internalError, "the enclave could not save its state")
        }
    }

    func enroll(passcode: String, name: String, progress: @escaping @Sendable (EnrolmentProgress) -> Void = { _ in }) async throws {
        // One enrolment change at a time: the sensor call suspends, and a second change must not
        // start from the list the first is replacing.
        guard !enrolmentBusy else { throw Failure(.busy, "another enrolment change is in progress") }
        enrolmentBusy = true
        defer { enrolmentBusy = false }
        guard let sensor else { throw Failure(.noSensor, "there is no biometric sensor to enrol on") }
        try Self.validateIdentityName(name)
        try await requirePasscode(passcode)
        record.enrolment = try await sensor.enroll(uid: uid, name: name, stored: record.enrolment, progress: progress)
        record.enrolmentGeneration += 1
        try persist()
    }

    /// The enrolled identities' names: the person's to see, with the passcode.
    func enrolments(passcode: String) async throws -> [String] {
        try await confirmPasscode(passcode)
        return try await identities()
    }

    func unenroll(passcode: String, name: String) async throws {
        // One enrolment change at a time: the sensor call suspends, and a second change must not
        // start from the list the first is replacing.
        guard !enrolmentBusy else { throw Failure(.busy, "another enrolment change is in progress") }
        enrolmentBusy = true
        defer { enrolmentBusy = false }
        guard let sensor else { throw Failure(.noSensor, "there is no biometric sensor") }
        try await requirePasscode(passcode)
        record.enrolment = try await sensor.unenroll(uid: uid, name: name, stored: record.enrolment)
        record.enrolmentGeneration += 1
        try persist()
    }

    static func validateIdentityName(_ name: String) throws {
        try Request.Enroll(name: name).validate()
    }

    // MARK: Administration

    func resetPasscodeLockout() throws {
        record.ledger.administratorReset()
        try persist()
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
            throw Failure(.notPermitted, "your device passcode is your login password: its counter is lifted by root (sudo lactl admin reset-passcode --uid \(uid))")
        }
        guard !loginCheckBusy else { throw Failure(.busy, "another login password check of this user is running") }
        loginCheckBusy = true
        defer { loginCheckBusy = false }
        if let wait = record.loginPasswordAttempts.retryAfter(now: clock.wall()) {
            throw Failure(.passcodeRetryLater, "login password entry is delayed after \(record.loginPasswordAttempts.failures) wrong ones; try again in \(Int(wait.rounded(.up))) s",
                          retryAfter: wait)
        }
        let before = record.loginPasswordAttempts
        record.loginPasswordAttempts.recordFailure(now: clock.wall())
        try persist()
        switch await PAMAuthenticator.check(service: config.loginPasswordService, user: username, password: password) {
        case .accepted:
            record.loginPasswordAttempts = PasswordAttempts()
            record.ledger.administratorReset()
            try persist()
        case .refused(let why):
            logger.notice("PAM refused the login password", metadata: ["uid": "\(uid)", "pam": "\(why)"])
            throw Failure(.passcodeIncorrect, "the login password is not correct (\(record.loginPasswordAttempts.failures) in a row)")
        case .unsuitable(let why):
            record.loginPasswordAttempts = before
            try persist()
            throw Failure(.notPermitted, why)
        }
    }

    func remoteLock() throws {
        record.ledger.remoteLock()
        try persist()
    }

    // MARK: The scripted person

    func simulate(_ events: [SimulatedEvent]) throws {
        try script.append(events, simulationEnabled: config.simulationEnabled, realSensor: config.realSensor)
        activeInputs?.yield(.simulatedAvailable)
    }

    func clearSimulated() { script.clear() }

    /// The next scripted event, for the running evaluation.
    func takeQueuedEvent() -> SimulatedEvent? { script.next() }

    // MARK: Evaluation

    func evaluate(policy: PolicyValue, passcodeOnly: Bool = false, options: EvaluationOptions, app: String, authorization: ContextAuthorization?,
                  inputs: AsyncStream<SessionInput>, continuation: AsyncStream<SessionInput>.Continuation, captureExecutor: (any TaskExecutor)? = nil,
                  show: @escaping @Sendable (PromptScreen) async -> Void,
                  audit: @escaping @Sendable (EvaluationMachine.Outcome) -> AuditEntry) async -> EvaluationReport {
        var runner = EvaluationRunner(policy: policy, passcodeOnly: passcodeOnly, options: options, app: app, authorization: authorization,
                                      inputs: inputs, continuation: continuation, captureExecutor: captureExecutor, show: show, audit: audit)
        return await runner.run(on: self)
    }

    /// The biometry this user's evaluations report.
    var sensorKind: BiometryKind { sensor?.info.kind ?? .none }

    // MARK: One prompt per user

    func acquirePrompt(timeout: Double) async -> Bool {
        guard let id = prompt.enter() else { return true }
        let timer = Deadline(after: timeout) { [weak self] in
            Task { await self?.dropPromptWaiter(id) }
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                prompt.wait(id, c)
            }
        } onCancel: {
            Task { await self.dropPromptWaiter(id) }
        }
    }

    private func dropPromptWaiter(_ id: UInt64) { prompt.drop(id) }

    func releasePrompt() { prompt.leave() }
}

/// The account name of `uid` (PAM and fprintd know users by name), or the number when it has none.
/// Reentrant (`getpwuid_r`): it is read on the event loops and on fprintd's worker at once, and
/// `getpwuid`'s one static entry would let one thread's answer overwrite another's.
func accountName(uid: UInt32) -> String {
    var size = 4096
    while true {
        var buffer = [CChar](repeating: 0, count: size)
        // The entry's strings live in the buffer: read them while it is held.
        let (status, name) = buffer.withUnsafeMutableBufferPointer { storage -> (Int32, String?) in
            var entry = passwd()
            var found: UnsafeMutablePointer<passwd>?
            let status = getpwuid_r(uid, &entry, storage.baseAddress!, storage.count, &found)
            guard status == 0, found != nil, let name = entry.pw_name else { return (status, nil) }
            return (status, String(cString: name))
        }
        if status == ERANGE && size < 1 << 20 { size *= 4; continue }
        return name ?? String(uid)
    }
}

/// The keys the master key derives for one user: the one that wraps the user's class keys, and the
/// one items and Secure Enclave keys were sealed under before class keys (read only for those).
struct UserKeys: Sendable {
    var wrapping: SymmetricKey
    var legacy: SymmetricKey
}
