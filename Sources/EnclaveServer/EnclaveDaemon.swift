import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's shared parts: configuration, storage, the sensor, and one session per user.
public final class EnclaveDaemon: Sendable {
    /// As resolved, with simulation narrowed to what the chosen sensor allows.
    public let config: DaemonConfiguration
    let storage: Storage
    let auditLog: AuditLog
    let sensor: (any BiometricSensor)?
    let clock: any EnclaveClock
    let logger: Logger
    let masterKey: SymmetricKey
    /// Which root gave the master key (`MasterKeyRoot`).
    let root: MasterSecretRoot
    /// On a TPM root: the state held against the TPM's rollback counter.
    let rollback: RollbackGuard?
    /// Where Secure Enclave keys are made and used (`KeyEngine`): the TPM on a TPM root.
    let keyEngine: KeyEngine
    /// Each share's way onto the TPM (`KeyEngine.forUser`).
    let tpmAdmissions = TPMAdmissions()
    /// On a TPM root: the daemon's attestation key in the TPM.
    let tpmAttestation: TPMAttestationKeys?
    /// `issueRecovery`, `moveToTPM`: the TPM's secret, kept for `issueRecoverySecret` only.
    private let secretToIssueFor: [UInt8]?
    /// On a state moved from the software root: the key file's key (`MasterKeyRoot.Opened`).
    private let softwareKey: SymmetricKey?

    /// `--issue-tpm-recovery`, once the daemon's state opened whole: a new recovery secret, given
    /// to `show` (which must have shown it, or throw) before it replaces the one before.
    public func issueRecoverySecret(show: (String) throws -> Void) throws {
        guard let secretToIssueFor else {
            throw DaemonError(.masterKeyRoot, "--issue-tpm-recovery: this state is not sealed to a TPM")
        }
        try TPMRootRecovery.issue(tpmSecret: secretToIssueFor, stateDirectory: config.stateDirectory, show: show)
    }
    /// Nil when the stored authority cannot be opened: keys then get no attestation, and
    /// everything else works.
    let attestor: KeyAttestor?
    private let sessions = SessionRegistry()
    /// Set when a graceful stop begins: what ends then ends with systemCancel, not appCancel.
    let stopping = StopFlag()
    /// Tickets of the handoff socket (`HandoffServer`), issued on connections.
    let handoff: HandoffRegistry
    /// The graphical prompt agents serving their sessions (`PromptAgent`).
    let promptAgents = PromptAgentRegistry()
    /// The privileged helper that pins other users' processes, when this daemon gave up the
    /// capabilities to do it itself (`PeerHelper`).
    let peerHelper: PeerHelperClient?
    private let lockDescriptor: Int32

    /// The user a user-mode daemon serves: the one it runs as (in-process tests may name another).
    public let servedUser: UInt32

    public init(
        config: DaemonConfiguration,
        clock: any EnclaveClock = SystemClock(),
        servedUser: UInt32 = getuid(),
        logger: Logger,
        peerHelper: PeerHelperClient? = nil,
        recoverySecret: String? = nil,
        issueRecovery: Bool = false,
        moveToTPM: Bool = false
    ) throws {
        self.servedUser = servedUser
        self.peerHelper = peerHelper
        // Every file made here gets its mode explicitly (state 0600, directories 0700); the process's
        // umask is the executable's to set, not a library's (tests run daemons in-process).
        try Storage.makePrivateDirectory(config.stateDirectory)
        let lockPath = config.stateDirectory + "/laenclaved.lock"
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw DaemonError(.cannotLock, "cannot lock \(lockPath): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let e = errno
            close(fd)
            if e == EWOULDBLOCK {
                throw DaemonError(.alreadyRunning, "another laenclaved already serves \(config.stateDirectory)")
            }
            throw DaemonError(.cannotLock, "cannot lock \(lockPath): \(String(cString: strerror(e)))")
        }
        lockDescriptor = fd
        self.clock = clock
        self.logger = logger
        handoff = HandoffRegistry(clock: clock)
        storage = try Storage(
            directory: config.stateDirectory,
            quota: KeychainQuota(items: config.keychainQuotaItems, bytes: config.keychainQuotaBytes),
            logger: logger
        )
        auditLog = AuditLog(storage: storage, logger: logger)
        let oneShot: MasterKeyRoot.OneShot? =
            recoverySecret.map { .recover(secret: $0) }
            ?? (issueRecovery ? .issueRecovery : moveToTPM ? .moveToTPM : nil)
        let opened = try MasterKeyRoot.open(config: config, storage: storage, oneShot: oneShot, logger: logger)
        secretToIssueFor = opened.secretToIssueFor
        softwareKey = opened.softwareKey
        masterKey = opened.key
        root = opened.root
        for key in [opened.key, opened.softwareKey].compactMap({ $0 }) {
            if let problem = SecretMemory.lock(key) { logger.warning("the master key: \(problem)") }
        }
        if let note = opened.note { logger.notice("\(note)") }
        logger.info("master key root: \(opened.root.rawValue)")
        if !SystemCallInterruption.isAvailable {
            logger.warning(
                "no SIGURG handler could be installed: a client that blocks the terminal or pipe it handed over can hold a thread of the daemon's"
            )
        }
        // A lost or swapped key file must not silently make every item undecryptable.
        guard try storage.confirmMasterKey(check: MasterKeyRoot.check(of: masterKey), root: opened.root) else {
            throw DaemonError(
                .masterKeyFile,
                "master key \(config.masterKeyPath) does not belong to the state in \(config.stateDirectory); restore the key file that was used with it, or move that state away"
            )
        }
        keyEngine = opened.counter.map { .tpm(tcti: $0.tcti) } ?? .software
        tpmAttestation = opened.counter == nil ? nil : TPMAttestationKeys(storage: storage, master: masterKey)
        if let counter = opened.counter {
            rollback = try RollbackGuard.open(
                storage: storage,
                tcti: counter.tcti,
                auth: counter.auth,
                master: masterKey,
                // A TPM the state is sealed to anew has no counter of this state's.
                reanchor: config.reanchor || recoverySecret != nil,
                logger: logger
            )
        } else {
            guard !config.reanchor else {
                throw DaemonError(
                    .masterKeyRoot,
                    "--reanchor: this state's root is the software root, which has no rollback counter"
                )
            }
            rollback = nil
        }
        _ = try storage.upgradeSealing(master: masterKey)
        try storage.vacuumOnceForClassKeys()
        switch config.fprintd {
        case .required:
            do { sensor = try FprintdSensor() } catch {
                throw DaemonError(.sensorUnavailable, "the fingerprint reader is not usable: \(error)")
            }
        case .ifAvailable:
            do {
                sensor = try FprintdSensor()
            } catch {
                logger.notice(
                    "no fingerprint reader through fprintd; \(config.simulatedSensor.map { "using a simulated \($0.displayName)" } ?? "no biometric sensor")",
                    metadata: ["reason": "\(error)"]
                )
                sensor = config.simulatedSensor.map { SimulatedSensor(kind: $0) }
            }
        case .no:
            sensor = config.simulatedSensor.map { SimulatedSensor(kind: $0) }
        }
        let realSensor = sensor.map { !$0.info.simulated } ?? false
        var effective = config
        effective.narrowSimulation(realSensor: realSensor)
        self.config = effective
        do {
            let authority = try KeyAttestor.authority(storage: storage, master: masterKey, daemonMode: config.mode)
            attestor = KeyAttestor(
                authority: authority,
                daemonMode: config.mode,
                sensor: sensor.map { $0.info.simulated ? .simulated : .fprintd } ?? .none,
                simulationAllowed: effective.simulationEnabled,
                label: KeyAttestor.label(mode: config.mode, uid: servedUser, authority: authority)
            )
        } catch {
            logger.error(
                "keys will not be attested: the attestation authority is not usable",
                metadata: ["error": "\(error)"]
            )
            attestor = nil
        }
        for warning in config.sensorWarnings(realSensor: realSensor) { logger.warning("\(warning)") }
        if let service = config.pamService, let why = PAMAuthenticator.unsuitability(service: service) {
            logger.error("PAM passcode checks will be refused: \(why)")
        }
    }

    deinit { close(lockDescriptor) }

    /// Reads the 32-byte master key, or creates it (random, 0600, in a 0700 directory).
    static func loadMasterKey(_ path: String) throws -> SymmetricKey {
        if let data = FileManager.default.contents(atPath: path) {
            guard data.count == 32 else { throw DaemonError(.masterKeyFile, "master key \(path) is not a 32-byte key") }
            return SymmetricKey(data: data)
        }
        try Storage.makePrivateDirectory((path as NSString).deletingLastPathComponent)
        let key = SymmetricKey(size: .bits256)
        do { try Storage.writePrivateFile(key.withUnsafeBytes { Data($0) }, to: path) } catch {
            throw DaemonError(.masterKeyFile, "master key \(path) could not be written: \(error)")
        }
        return key
    }

    /// The user's session, made on first use.
    func session(for uid: UInt32) throws -> UserSession {
        try sessions.session(for: uid) {
            try UserSession(
                uid: uid,
                storage: storage,
                sensor: sensor,
                config: config,
                clock: clock,
                logger: logger,
                stopping: stopping,
                attestor: attestor,
                rollback: rollback,
                keyEngine: keyEngine.forUser { tpmAdmissions.admission(for: uid) },
                tpmAttestation: tpmAttestation,
                keys: UserKeys(
                    wrapping: KeyHierarchy.wrappingKey(master: masterKey, uid: uid),
                    legacy: ItemSealing.legacyUserKey(master: softwareKey ?? masterKey, uid: uid),
                    passcode: KeyHierarchy.passcodeKey(master: masterKey, uid: uid),
                    priorPasscode: softwareKey.map { KeyHierarchy.passcodeKey(master: $0, uid: uid) }
                )
            )
        }
    }
}

/// One `UserSession` per uid. A lock, not an actor: the look-up is on every request's path and
/// must not cost a hop; only a user's first request makes (and loads) a session under it.
final class SessionRegistry: Sendable {
    private let sessions = Mutex<[UInt32: UserSession]>([:])

    func session(for uid: UInt32, make: () throws -> UserSession) throws -> UserSession {
        try sessions.withLock { sessions in
            if let s = sessions[uid] { return s }
            let s = try make()
            sessions[uid] = s
            return s
        }
    }
}

/// Whether the daemon is stopping, readable from any thread; and so how an evaluation ends when
/// its request is ended from outside: appCancel (its client went, or invalidated the context), or
/// systemCancel once the daemon is stopping (the client is still there to read it).
final class StopFlag: Sendable {
    private let value = Atomic(false)
    private static let reason = "The enclave daemon is stopping."
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }

    /// The input that ends a running evaluation.
    var endingInput: EvaluationMachine.Input { isSet ? .systemCancel(Self.reason) : .appCancel }

    /// The answer of an evaluation ended that way; `appCancelReason` says why when it is appCancel.
    func endingOutcome(_ appCancelReason: String = "The client went away.") -> EvaluationMachine.Outcome {
        isSet ? .failure(.systemCancel, Self.reason) : .failure(.appCancel, appCancelReason)
    }
}
