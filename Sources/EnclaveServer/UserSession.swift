import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
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
    var saved: UserRecord
    var enrolmentBusy = false
    var passcodeCheckBusy = false
    var loginCheckBusy = false
    private var script = PersonScript()
    private var prompt = PromptQueue()
    /// The running evaluation's inputs, while this user's prompt is open.
    var activeInputs: AsyncStream<SessionInput>.Continuation?
    /// The app whose prompt is open: only it is told so (`UserStatus.promptOpen`).
    var activePromptApp: String?

    /// What the master key derives for this user (`KeyHierarchy`).
    let keys: UserKeys
    /// The user's class keys once read (or made); a destroyed one leaves at once.
    var classKeys: [KeyClass: SymmetricKey] = [:]
    private var domainStates = DomainStateMemo()
    /// The daemon's graceful stop has begun: evaluations ended from outside answer systemCancel.
    let stopping: StopFlag
    /// Certifies this user's Secure Enclave keys (`KeyRequest.Operation.attest`).
    let attestor: KeyAttestor?
    /// On a TPM root: the state against the TPM's rollback counter (`RollbackCounter`).
    let rollback: RollbackGuard?
    /// Where Secure Enclave keys are made and used: the daemon, or the TPM.
    nonisolated let keyEngine: KeyEngine
    /// On a TPM root: the daemon's attestation key (`KeyRequest.Operation.tpmCertify`…).
    nonisolated let tpmAttestation: TPMAttestationKeys?

    init(
        uid: UInt32,
        storage: Storage,
        sensor: (any BiometricSensor)?,
        config: DaemonConfiguration,
        clock: any EnclaveClock,
        logger: Logger,
        stopping: StopFlag = StopFlag(),
        attestor: KeyAttestor?,
        rollback: RollbackGuard? = nil,
        keyEngine: KeyEngine = .software,
        tpmAttestation: TPMAttestationKeys? = nil,
        keys: UserKeys
    ) throws {
        self.tpmAttestation = tpmAttestation
        self.uid = uid
        self.storage = storage
        self.sensor = sensor
        self.config = config
        self.clock = clock
        self.logger = logger
        self.stopping = stopping
        self.attestor = attestor
        self.rollback = rollback
        self.keyEngine = keyEngine
        self.keys = keys
        let loaded = try storage.loadUser(uid)
        var r = loaded ?? UserRecord(uid: uid, domainSecret: DomainStateHash.newSecret())
        let changed = r.ledger.noteLoaded(
            now: clock.monotonic(),
            lockBiometryOnBoot: config.mode == .system,
            wall: clock.wall()
        )
        if loaded == nil || changed {
            if let rollback {
                _ = try rollback.write(advancing: false) { db in try Storage.write(r, audit: [], db) }
            } else {
                try storage.save(r)
            }
        }
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
    /// last durable one and throws. On a TPM root, a change that must never roll back moves the
    /// TPM's counter before this returns (`RollbackCounter`).
    func persist(audit: [AuditEntry] = []) async throws {
        try await persist(audit: audit) { db, record in try Storage.write(record, audit: audit, db) }
    }

    /// `persist` with the record written by `write` (with whatever else goes in its transaction).
    func persist(
        audit: [AuditEntry] = [],
        write: (Database, UserRecord) throws -> Void
    ) async throws {
        let written = record
        let move: UInt64?
        do {
            if let rollback {
                let advancing = RollbackCounter.mustAdvance(from: saved.guarded, to: written.guarded)
                move = try rollback.write(advancing: advancing) { db in try write(db, written) }
            } else {
                try storage.transaction { db in try write(db, written) }
                move = nil
            }
            // A verifier from before keying, replaced: its page images go from the files too.
            let unkeyedReplaced = saved.passcode.map { !$0.isKeyed && $0 != written.passcode } ?? false
            saved = written
            if unkeyedReplaced { storage.shred() }
        } catch {
            record = saved
            logger.error("could not save the user's record", metadata: ["uid": "\(uid)", "error": "\(error)"])
            throw DaemonError(.stateNotSaved, "the enclave could not save its state")
        }
        guard let move, let rollback else { return }
        do { try await rollback.move(to: move) } catch {
            // The change is durable; only the answer is withheld (a later check finishes the move).
            logger.error("a change was saved but the TPM's counter did not follow", metadata: ["error": "\(error)"])
            throw DaemonError(
                .rollbackCounterNotMoved,
                "the TPM's rollback counter did not follow a saved change: \(error)"
            )
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
            logger.notice(
                "the enrolled set was changed outside laenclaved",
                metadata: ["uid": "\(uid)", "identities": "\(now.count)"]
            )
            try await persist()
        }
        return now
    }

    func facts() async throws -> DeviceFacts {
        // A refusal that waits for the TPM is looked at again here, so evaluations lift it too.
        if let rollback, rollback.refusedUntilTheTPMAnswers { _ = await rollback.verify() }
        return DeviceFacts(
            sensor: sensor?.info.kind ?? .none,
            enrolled: !(try await identities()).isEmpty,
            passcodeSet: passcodeIsSet,
            stateRefusal: rollback?.refusal
        )
    }

    func domainState(app: String) async throws -> Data? {
        _ = try await identities()
        return recordedDomainState(app: app)
    }

    /// The domain state of the enrolled set as last read (an evaluation read it when it started;
    /// `canEvaluate`, in its `facts()`).
    func recordedDomainState(app: String) -> Data? {
        domainStates.hash(
            secret: record.domainSecret,
            app: app,
            sensor: sensor?.info.name ?? "",
            generation: record.enrolmentGeneration,
            identities: record.enrolment
        )
    }

    // MARK: Queries

    func canEvaluate(policy: PolicyValue, app: String) async throws -> CanEvaluateReply {
        let f = try await facts()
        let problem = Preflight.check(policy, facts: f, ledger: record.ledger, wall: clock.wall())
        // The enrolled set `facts()` just read: read once a request.
        let state =
            problem == nil && policy == .deviceOwnerAuthenticationWithBiometrics ? recordedDomainState(app: app) : nil
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
            uid: uid,
            mode: config.mode,
            app: app,
            sensor: sensor?.info,
            enrolledCount: ids.count,
            passcodeSet: passcodeIsSet,
            biometricFailures: record.ledger.biometricFailures,
            biometryLockout: record.ledger.biometryRefusal(now: clock.wall())?.rawValue,
            passcodeFailures: record.ledger.passcodeFailures,
            passcodeRetryAfter: retryAfter,
            passcodeDisabled: disabled,
            queuedEvents: script.count,
            domainState: try await domainState(app: app),
            simulationEnabled: config.simulationEnabled,
            promptOpen: activePromptApp == app,
            passcodeMinimumLength: usesPAM ? nil : config.passcodeMinimumLength,
            passcodeShorterThanMinimum: usesPAM
                ? nil : record.passcode?.length(key: keys.passcode).map { $0 < config.passcodeMinimumLength },
            enrolmentChangedElsewhereAt: record.enrolmentChangedElsewhereAt?.timeIntervalSince1970,
            stateRefused: rollback?.refusal
        )
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

    func evaluate(
        policy: PolicyValue,
        passcodeOnly: Bool = false,
        options: EvaluationOptions,
        app: String,
        authorization: ContextAuthorization?,
        inputs: AsyncStream<SessionInput>,
        continuation: AsyncStream<SessionInput>.Continuation,
        captureExecutor: (any TaskExecutor)? = nil,
        show: @escaping @Sendable (PromptScreen) -> Void,
        audit: @escaping @Sendable (EvaluationMachine.Outcome) -> AuditEntry,
        secret: EvaluationMachine.Secret = .devicePasscode,
        promptTimeout: Double? = nil,
        end: RequestEnd
    ) async -> EvaluationReport {
        var runner = EvaluationRunner(
            policy: policy,
            passcodeOnly: passcodeOnly,
            options: options,
            app: app,
            authorization: authorization,
            inputs: inputs,
            continuation: continuation,
            captureExecutor: captureExecutor,
            show: show,
            audit: audit,
            end: end
        )
        runner.secret = secret
        runner.promptTimeout = promptTimeout
        return await runner.run(on: self)
    }

    /// The biometry this user's evaluations report.
    var sensorKind: BiometryKind { sensor?.info.kind ?? .none }

    // MARK: One prompt per user

    /// How taking the user's one prompt went.
    enum PromptTurn { case free, afterWaiting, gaveUp }

    /// Takes the user's one prompt, waiting behind the others up to `timeout` seconds. The wait
    /// ends at once when `end` does (its request's context was invalidated or its client went
    /// away), or when the task is cancelled (the daemon stops). The turn may still come as the end
    /// does: the caller looks at `end` once it has the prompt.
    func acquirePrompt(timeout: Double, until end: RequestEnd) async -> PromptTurn {
        guard !end.hasEnded else { return .gaveUp }
        guard let id = prompt.enter() else { return .free }
        let timer = Deadline(after: timeout) { [weak self] in
            Task { await self?.dropPromptWaiter(id) }
        }
        defer { timer.cancel() }
        let ending = end.whenEnded { [weak self] in
            Task { await self?.dropPromptWaiter(id) }
        }
        defer { if let ending { end.forget(ending) } }
        let taken = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                prompt.wait(id, c)
                if ending == nil { prompt.drop(id) }
            }
        } onCancel: {
            Task { await self.dropPromptWaiter(id) }
        }
        return taken ? .afterWaiting : .gaveUp
    }

    private func dropPromptWaiter(_ id: UInt64) { prompt.drop(id) }

    func releasePrompt() { prompt.leave() }
}

/// The account name of `uid` (PAM and fprintd know users by name), or the number when it has none.
/// Reentrant (`getpwuid_r`): it is read on the event loops and on fprintd's worker at once, and
/// `getpwuid`'s one static entry would let one thread's answer overwrite another's.
func accountName(uid: UInt32) -> String {
    let name = passwordEntry(
        lookup: { getpwuid_r(uid, $0, $1, $2, $3) },
        read: { $0.pw_name.map { String(cString: $0) } }
    )
    return name ?? String(uid)
}

/// The uid of the local user `name` in the machine's user database; nil when there is none.
func accountUID(name: String) -> UInt32? {
    passwordEntry(lookup: { getpwnam_r(name, $0, $1, $2, $3) }, read: { $0.pw_uid })
}

/// One entry of the user database through a reentrant `getpw*_r` call, `read` while its buffer is
/// held (the entry's strings live in it); the buffer grows while the call says ERANGE.
private func passwordEntry<T>(
    lookup: (
        UnsafeMutablePointer<passwd>, UnsafeMutablePointer<CChar>, Int,
        UnsafeMutablePointer<UnsafeMutablePointer<passwd>?>
    ) -> Int32,
    read: (passwd) -> T?
) -> T? {
    var size = 4096
    while true {
        var buffer = [CChar](repeating: 0, count: size)
        let (status, value) = buffer.withUnsafeMutableBufferPointer { storage -> (Int32, T?) in
            var entry = passwd()
            var found: UnsafeMutablePointer<passwd>?
            let status = lookup(&entry, storage.baseAddress!, storage.count, &found)
            return (status, status == 0 && found != nil ? read(entry) : nil)
        }
        if status == ERANGE && size < 1 << 20 {
            size *= 4
            continue
        }
        return value
    }
}

/// The keys the master key derives for one user: the one that wraps the user's class keys, and the
/// one items and Secure Enclave keys were sealed under before class keys (read only for those).
struct UserKeys: Sendable {
    var wrapping: SymmetricKey
    var legacy: SymmetricKey
    /// Keys the passcode verifier (`KeyHierarchy.passcodeKey`).
    var passcode: SymmetricKey
    /// On a state moved from the software root: the verifier's key before the move, which a moved
    /// verifier needs beside `passcode` until its next success remakes it (`PasscodeVerifier.moved`).
    var priorPasscode: SymmetricKey? = nil
}
