import EnclaveProtocol

public struct DaemonConfiguration: Sendable {
    public var mode: DaemonMode
    public var socketPath: String
    public var stateDirectory: String
    /// The master key of keychain encryption, kept outside the state directory so that a copy of
    /// the state alone decrypts nothing. Created (0600, directory 0700) when missing.
    public var masterKeyPath: String
    /// The simulated sensor, if any. In system mode it runs only when explicitly enabled.
    public var simulatedSensor: BiometryKind?
    /// The PAM service that checks the device passcode as the user's login password; nil: the
    /// daemon's own passcode (set with `lactl passcode set`).
    public var pamService: String?
    /// The users whose passcode is their login password; nil: every user (when `pamService` is set).
    public var pamUsers: Set<String>?
    /// The PAM service that checks login passwords (`pam-service`), whatever the passcode source:
    /// in user mode the login password is what lifts a disabled passcode.
    public var loginPasswordService = "laenclaved"
    /// Whether to use the fingerprint reader fprintd serves. `ifAvailable` (the `auto` sensor) falls
    /// back to `simulatedSensor` when fprintd has no reader.
    public var fprintd: FprintdUse = .no
    public enum FprintdUse: Sendable { case no, required, ifAvailable }
    /// Whether `simulate` requests (scripted touches and typed passcodes) are accepted. The merge
    /// gives the mode's default; the daemon narrows it once it knows its sensor
    /// (`simulationAccepted(realSensor:)`).
    public var simulationEnabled: Bool
    /// Whether simulation was turned on by name (`allow-simulation = yes`, `--allow-simulation`),
    /// not by the user mode's default: only that lets scripted input reach a real reader.
    public var simulationExplicit = false
    /// Whether the sensor the daemon chose is a real reader (set by `narrowSimulation`).
    public private(set) var realSensor = false
    /// scrypt cost (log2 N) for new passcode verifiers.
    public var passcodeCost: Int = PasscodeVerifier.defaultCost
    /// Characters a new passcode needs.
    public var passcodeMinimumLength = PasscodeVerifier.minimumLength
    /// How long one prompt may stay open before it ends with `systemCancel`.
    public var promptTimeout: Double = 300
    /// How long a second evaluation of the same user waits for the prompt before `systemCancel`.
    public var promptQueueTimeout: Double = 30
    /// How long a successfully evaluated `LAContext` stays authorized.
    public var contextLifetime: Double = ContextAuthorization.defaultLifetime
    /// Connections served at once, per user and in all.
    public var connectionLimits: ConnectionBudget.Limits = .standard
    /// How long a new connection may take to say hello before it is closed.
    public var helloTimeout: Double = 10
    /// The executable admitted as the graphical prompt agent (`PromptAgents.admits`); nil: none.
    public var promptAgentPath: String?
    /// Whether administration may read the person's passcode from a pipe a client hands (`lactl …
    /// --stdin`) — our rule (issue 33): only where it was set up outside any app's reach, by a
    /// file only root can write (`administration-pipe = yes` in /etc/laenclaved/laenclaved.conf, or
    /// a system daemon's own `--config` file) or by whoever started the daemon (`--administration-pipe`,
    /// the testing kit's: its daemon is the test's). Root's own requests may always use it.
    /// Otherwise an app that learned the passcode could write it into a pipe and reach every app.
    public var administrationPipe = false
    /// What only root may choose that the daemon's own file said where it does not count (a user-mode
    /// daemon's file, or one others than root may write: `administration-pipe = yes`,
    /// `terminal-holders`): ignored, and said at start.
    public var ignoredRootSettings: [String] = []
    /// The programs trusted to hold the other side of a terminal administration is asked on
    /// (`TerminalHolders`): `terminal-holders` from a file only root can write, else the default.
    public var terminalHolders = TerminalHolders.defaultTrusted
    /// Which root holds the master secret for a new state (`HardwareRoot`): `tpm`, `--tpm`. By
    /// default `auto` for the system daemon (the machine's TPM when it may open it, else the
    /// software root, said) and `off` for a user-mode daemon (our choice: each would take an NV
    /// counter of its own in the TPM's small NV, and a user is seldom given the TPM).
    public var tpm: HardwareRoot.Setting = .off
    /// `--require-tpm` / `require-tpm = yes`: no start without the TPM root.
    public var requireTPM = false
    /// `move-to-tpm = yes`: a software-root state moves to the TPM root at start
    /// (`SoftwareRootMove`); in system mode only from a file only root can write, as `tpm`.
    public var moveToTPM = false
    /// `handoff`: who may hand over on the handoff socket (`HandoffSocketSetting`).
    public var handoff: HandoffSocketSetting = .always
    /// Where logind states its sessions (`sessions/ID`: remote or not, seat): what a PAM
    /// authentication learns of the requesting process's session. Another directory only for the
    /// PAM module's tests (`--logind-directory`), on machines without logind.
    public var logindDirectory = "/run/systemd"
    /// `--reanchor`: root's recovery after a rollback refusal (`RollbackCounter`): the state is
    /// taken as it is and bound to a new TPM counter, then the daemon exits.
    public var reanchor = false
    /// How long the agent may take to say a prompt's window is up before it is dropped and the
    /// prompt goes to the next presenter.
    public var promptAgentAnswerTimeout: Double = 3
    /// How much of the keychain one user may fill (our choice: 10,000 items, 64 MiB).
    public var keychainQuotaItems = DaemonConfiguration.standardKeychainQuotaItems
    public var keychainQuotaBytes = DaemonConfiguration.standardKeychainQuotaBytes
    public static let standardKeychainQuotaItems = 10_000
    public static let standardKeychainQuotaBytes = 64 << 20

    public init(
        mode: DaemonMode,
        socketPath: String,
        stateDirectory: String,
        masterKeyPath: String,
        simulatedSensor: BiometryKind?,
        simulationEnabled: Bool
    ) {
        self.mode = mode
        self.socketPath = socketPath
        self.stateDirectory = stateDirectory
        self.masterKeyPath = masterKeyPath
        self.simulatedSensor = simulatedSensor
        self.simulationEnabled = simulationEnabled
    }
}

/// What the daemon's command line said: each value, when given, overrides the configuration file.
public struct DaemonCommandLine: Sendable, Equatable {
    public var mode: DaemonMode
    public var socket: String?
    public var stateDirectory: String?
    public var keyFile: String?
    /// `--simulated-sensor` or `--fprintd`, as the file's `sensor` would say it.
    public var sensor: DaemonSettings.Sensor?
    public var passcodeSource: DaemonSettings.PasscodeSource?
    public var pamService: String?
    public var pamUsers: Set<String>?
    /// `--allow-simulation` (true) or `--no-simulation` (false).
    public var allowSimulation: Bool?
    public var passcodeCost = PasscodeVerifier.defaultCost
    public var passcodeMinimumLength = PasscodeVerifier.minimumLength
    public var promptTimeout: Double = 300
    public var promptQueueTimeout: Double = 30
    public var contextLifetime = ContextAuthorization.defaultLifetime
    public var connectionLimits: ConnectionBudget.Limits = .standard
    public var helloTimeout: Double = 10
    /// `--prompt-agent PATH`, or "" for `--prompt-agent none`.
    public var promptAgent: String?
    /// `--administration-pipe`: whoever started this daemon lets administration read the passcode
    /// from a handed pipe (the testing kit: its daemon is the test's).
    public var administrationPipe = false
    /// `--tpm`: the root for a new state, over the file's `tpm`.
    public var tpm: HardwareRoot.Setting?
    /// `--require-tpm`.
    public var requireTPM = false
    /// `--reanchor`.
    public var reanchor = false
    /// `--logind-directory`.
    public var logindDirectory: String?
    /// `--handoff`, over the file's `handoff`.
    public var handoff: HandoffSocketSetting?

    public init(mode: DaemonMode) { self.mode = mode }
}

/// Where a daemon of each mode listens and keeps its state when nothing says otherwise
/// (`EnclavePaths`, read from the environment by the executable).
public struct DaemonDefaultPaths: Sendable, Equatable {
    public var socket: String
    public var stateDirectory: String
    public var masterKey: String
    /// The prompt agent installed beside the daemon (`laenclaved-agent` in the daemon's own
    /// directory), when there is one.
    public var promptAgent: String?

    public init(socket: String, stateDirectory: String, masterKey: String, promptAgent: String? = nil) {
        self.socket = socket
        self.stateDirectory = stateDirectory
        self.masterKey = masterKey
        self.promptAgent = promptAgent
    }
}

extension DaemonConfiguration {
    /// The one merge of the configuration file, the command line over it, and the mode's defaults.
    /// `systemFile`: in user mode, the system's configuration file, for what only root may choose.
    public static func resolve(
        file: SettingsFile,
        systemFile: SettingsFile? = nil,
        commandLine: DaemonCommandLine,
        defaults: DaemonDefaultPaths
    ) -> DaemonConfiguration {
        let mode = commandLine.mode
        var settings = file.settings
        if let sensor = commandLine.sensor { settings.sensor = sensor }
        if let source = commandLine.passcodeSource { settings.passcodeSource = source }
        if let service = commandLine.pamService { settings.pamService = service }
        if let users = commandLine.pamUsers { settings.pamUsers = users }
        if let allow = commandLine.allowSimulation { settings.allowSimulation = allow }
        if let agent = commandLine.promptAgent { settings.promptAgent = agent }

        let simulated: BiometryKind? =
            switch settings.sensor {
            case .simulatedTouchID: .touchID
            case .simulatedFaceID: .faceID
            case .auto: mode == .user ? .touchID : nil  // what `auto` falls back to without a reader
            case .fprintd, .none: nil
            }
        var config = DaemonConfiguration(
            mode: mode,
            socketPath: commandLine.socket ?? defaults.socket,
            stateDirectory: commandLine.stateDirectory ?? defaults.stateDirectory,
            masterKeyPath: commandLine.keyFile ?? defaults.masterKey,
            simulatedSensor: simulated,
            simulationEnabled: settings.allowSimulation ?? (mode == .user)
        )
        config.simulationExplicit = settings.allowSimulation == true
        config.fprintd =
            switch settings.sensor {
            case .fprintd: .required
            case .auto: .ifAvailable
            default: .no
            }
        config.loginPasswordService = settings.pamService
        if settings.passcodeSource == .pam {
            config.pamService = settings.pamService
            config.pamUsers = settings.pamUsers
        }
        config.passcodeCost = commandLine.passcodeCost
        config.passcodeMinimumLength = commandLine.passcodeMinimumLength
        config.promptTimeout = commandLine.promptTimeout
        config.promptQueueTimeout = commandLine.promptQueueTimeout
        config.contextLifetime = commandLine.contextLifetime
        config.connectionLimits = commandLine.connectionLimits
        config.helloTimeout = commandLine.helloTimeout
        if let logind = commandLine.logindDirectory { config.logindDirectory = logind }
        let agent = settings.promptAgent ?? defaults.promptAgent
        config.promptAgentPath = agent?.isEmpty == false ? agent : nil
        // What only root may choose: from the system daemon's own file when only root can write it;
        // a user-mode daemon's own file never says it (whoever starts that daemon picks its file,
        // and a root-owned file is not always root's words: /proc holds some), only the system's.
        let rootsFile = (mode == .system ? file : systemFile).flatMap { $0.onlyRootWrites ? $0.settings : nil }
        // A system daemon's root is root's to choose (whoever writes the file could pick a TPM
        // simulator of theirs, which would hold the TPM half of every user's keys); requiring the
        // TPM only restricts, and counts from anywhere.
        config.tpm = commandLine.tpm ?? (mode == .system ? rootsFile?.tpm ?? .auto : settings.tpm ?? .off)
        config.requireTPM = commandLine.requireTPM || settings.requireTPM == true
        config.moveToTPM = (mode == .system ? rootsFile?.moveToTPM : settings.moveToTPM) == true
        config.reanchor = commandLine.reanchor
        config.handoff = commandLine.handoff ?? settings.handoff ?? .always
        config.administrationPipe = commandLine.administrationPipe || rootsFile?.administrationPipe == true
        if let holders = rootsFile?.terminalHolders { config.terminalHolders = holders }
        if mode == .system, !file.onlyRootWrites {
            if file.settings.tpm != nil { config.ignoredRootSettings.append("tpm") }
            if file.settings.moveToTPM != nil { config.ignoredRootSettings.append("move-to-tpm") }
        }
        if mode == .user || !file.onlyRootWrites {
            if file.settings.administrationPipe == true { config.ignoredRootSettings.append("administration-pipe") }
            if file.settings.terminalHolders != nil { config.ignoredRootSettings.append("terminal-holders") }
        }
        return config
    }

    /// Whether `simulate` is accepted with this sensor. With a real reader a scripted touch would pass
    /// a prompt the person is meant to answer with a finger, so only when an administrator asked for
    /// it by name (our choice: Apple has no simulation at all; ours exists for tests and demos, which
    /// use simulated sensors).
    public func simulationAccepted(realSensor: Bool) -> Bool {
        realSensor ? simulationExplicit : simulationEnabled
    }

    /// The configuration once the daemon has chosen its sensor: simulation as that sensor allows.
    public mutating func narrowSimulation(realSensor: Bool) {
        simulationEnabled = simulationAccepted(realSensor: realSensor)
        self.realSensor = realSensor
    }

    /// Scripted input reaches a real reader (after `narrowSimulation`): every prompt says so.
    public var scriptedInputOnRealSensor: Bool { realSensor && simulationEnabled }

    /// What the daemon says loudly once its sensor is chosen.
    public func sensorWarnings(realSensor: Bool) -> [String] {
        guard realSensor, simulationAccepted(realSensor: true) else { return [] }
        return [
            "SIMULATION ENABLED WITH A REAL FINGERPRINT READER: scripted touches and passcodes (lactl simulate) pass its prompts"
        ]
    }

    /// What the daemon says loudly at start: a configuration that weakens the promise.
    public var warnings: [String] {
        var warnings: [String] = []
        // `auto` never falls back to a simulator in system mode, so a simulated sensor here was chosen.
        if mode == .system, simulatedSensor != nil {
            warnings.append(
                "SIMULATED SENSOR ENABLED IN SYSTEM MODE: anyone who can queue events can pass biometric checks"
            )
        }
        for setting in ignoredRootSettings {
            warnings.append(
                "\(setting) is ignored here: only root sets it, in /etc/laenclaved/laenclaved.conf (owned by root, not group- or world-writable; a system daemon's own --config file likewise)"
            )
        }
        return warnings
    }
}
