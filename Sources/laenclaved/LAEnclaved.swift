import ArgumentParser
import EnclaveCore
import EnclaveProtocol
import EnclaveServer
import Foundation
import Logging
import ServiceLifecycle

@main
struct LAEnclaved: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "laenclaved",
        abstract: "The enclave daemon: owns sensors, enrolment, the device passcode and the failure counters.",
        discussion: """
            User mode (the default) serves only the user who runs it: socket under $XDG_RUNTIME_DIR, state \
            under $XDG_DATA_HOME. The client library starts it on first use. System mode serves every user of \
            the machine: socket in /run/laenclaved, state in /var/lib/laenclaved (run it as root or its own user).
            """
    )

    enum SensorChoice: String, ExpressibleByArgument, CaseIterable {
        case touchid, faceid, none
    }

    @Flag(help: "Serve every user of the machine (default: only the invoking user).")
    var system = false

    @Flag(name: .customLong("user"), help: "Serve only the invoking user (the default).")
    var userMode = false

    @Option(help: "Socket path.")
    var socket: String?

    @Option(name: .customLong("state-dir"), help: "State directory (created 0700).")
    var stateDirectory: String?

    @Option(
        name: .customLong("key-file"),
        help:
            "The keychain master key (created when missing). Default: $XDG_CONFIG_HOME/laenclaved/master.key in user mode, /etc/laenclaved/master.key in system mode."
    )
    var keyFile: String?

    @Option(
        name: .customLong("simulated-sensor"),
        help: "Simulated biometric sensor: touchid, faceid or none. Default: touchid in user mode, none in system mode."
    )
    var simulatedSensor: SensorChoice?

    @Flag(
        name: .customLong("fprintd"),
        help: "Use the fingerprint reader served by fprintd (D-Bus system bus; $DBUS_SYSTEM_BUS_ADDRESS is honoured)."
    )
    var fprintd = false

    @Option(
        name: .customLong("config"),
        help:
            "Configuration file (default: /etc/laenclaved/laenclaved.conf in system mode, $XDG_CONFIG_HOME/laenclaved/laenclaved.conf in user mode; see docs/configuration.md)."
    )
    var configFile: String?

    @Option(
        name: .customLong("passcode-source"),
        help: "enclave (the daemon's own passcode) or pam (the user's login password, checked through PAM)."
    )
    var passcodeSource: String?

    @Option(
        name: .customLong("pam-service"),
        help: "The PAM service (a file in /etc/pam.d) that checks login passwords."
    )
    var pamService: String?

    /// The privileged helper's own run (`PeerHelper`): its end of the socket pair.
    @Option(name: .customLong("peer-helper"), help: .hidden)
    var peerHelper: Int32?

    /// The daemon after it gave its capabilities to the helper: its end of the socket pair.
    @Option(name: .customLong("peer-helper-socket"), help: .hidden)
    var peerHelperSocket: Int32?

    @Option(
        name: .customLong("prompt-agent"),
        help: "The graphical prompt agent's executable, or none (default: laenclaved-agent beside laenclaved)."
    )
    var promptAgent: String?

    @Option(
        name: .customLong("pam-users"),
        help: "Comma-separated users whose passcode is their login password (default: every user)."
    )
    var pamUsers: String?

    @Flag(
        name: .customLong("allow-simulation"),
        help:
            "Accept simulated events (scripted touches, typed passcodes). Always on in user mode unless --no-simulation."
    )
    var allowSimulation = false

    @Flag(name: .customLong("no-simulation"), help: "Refuse simulated events.")
    var noSimulation = false

    @Option(
        name: .customLong("passcode-cost"),
        help: "scrypt cost (log2 N, r = 8) for new passcode verifiers (10…20; 17 = 128 MiB a check)."
    )
    var passcodeCost: Int = PasscodeVerifier.defaultCost

    @Option(
        name: .customLong("passcode-minimum-length"),
        help: "Characters a new passcode needs (4…64); passcodes set before keep working."
    )
    var passcodeMinimumLength: Int = PasscodeVerifier.minimumLength

    @Option(
        name: .customLong("prompt-timeout"),
        help: "Seconds a prompt may stay open before it ends with systemCancel."
    )
    var promptTimeout: Double = 300

    @Option(name: .customLong("prompt-queue-timeout"), help: "Seconds a second evaluation waits for the user's prompt.")
    var promptQueueTimeout: Double = 30

    @Option(name: .customLong("context-lifetime"), help: "Seconds an evaluated LAContext stays authorized.")
    var contextLifetime: Double = 300

    @OptionGroup var connections: ConnectionOptions

    @Flag(
        name: .customLong("exit-with-parent"),
        help: "Shut down when the process that started the daemon exits (used by the testing kit)."
    )
    var exitWithParent = false
    @Flag(
        name: .customLong("administration-pipe"),
        help:
            "Let administration read the passcode from a pipe a client hands (lactl … --stdin): for a daemon its starter provisions, such as the testing kit's. Else only root's requests, or administration-pipe = yes in a file only root can write, allow it."
    )
    var administrationPipe = false

    @Option(
        name: .customLong("tpm"),
        help:
            "The root of a new state: auto (the machine's TPM when this daemon may use it), off, or a TPM in tpm2-tss's syntax (device:/dev/tpmrm0, swtpm:host=H,port=P). Over the file's tpm; by default auto for --system, off for a user-mode daemon."
    )
    var tpm: String?
    @Flag(name: .customLong("require-tpm"), help: "Refuse to start without the TPM root.")
    var requireTPM = false
    @Flag(
        name: .customLong("reanchor"),
        help:
            "Root's recovery when a TPM-root state was refused as older than its rollback counter (or the counter is gone): accept the state as it is, bind it to a new counter, and exit. Run it as the daemon's own user, with the daemon stopped."
    )
    var reanchor = false

    @OptionGroup var sessions: LogindOptions
    @Flag(
        name: .customLong("recover-tpm-root"),
        help:
            "Root's recovery after a TPM clear, a new mainboard or an fTPM reset: read the recovery secret (typed without echo at a terminal, else from standard input), seal the state's master secret to the TPM this machine has now (--tpm), bind a new rollback counter, and exit. Run it as the daemon's own user, with the daemon stopped."
    )
    var recoverTPMRoot = false
    @Flag(
        name: .customLong("issue-tpm-recovery"),
        help:
            "Issue the TPM root's recovery secret of a state sealed to a TPM: shown once on standard output, never written; a secret issued before stops working. Run it as the daemon's own user, with the daemon stopped, and keep the secret off this machine."
    )
    var issueTPMRecovery = false
    @Flag(
        name: .customLong("move-to-tpm"),
        help:
            "Move a state made with the software root to the TPM root (--tpm, or the machine's), keeping every item, key, passcode and counter; then issue the TPM root's recovery secret, shown once on standard output, and exit. Run it as the daemon's own user, with the daemon stopped; destroy copies of the state taken before."
    )
    var moveToTPM = false

    @Option(name: .customLong("log-file"), help: "Append logs to this file (0600) instead of standard error.")
    var logFile: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    func validate() throws {
        if system && userMode { throw ValidationError("--system and --user exclude each other") }
        if fprintd && simulatedSensor != nil && simulatedSensor != SensorChoice.none {
            throw ValidationError("--fprintd and --simulated-sensor exclude each other")
        }
        if let passcodeSource, DaemonSettings.PasscodeSource(rawValue: passcodeSource) == nil {
            throw ValidationError("--passcode-source is enclave or pam")
        }
        if !(10...20).contains(passcodeCost) { throw ValidationError("--passcode-cost must be between 10 and 20") }
        if !(PasscodeVerifier.lowestMinimumLength...64).contains(passcodeMinimumLength) {
            throw ValidationError(
                "--passcode-minimum-length must be between \(PasscodeVerifier.lowestMinimumLength) and 64"
            )
        }
        if allowSimulation && noSimulation {
            throw ValidationError("--allow-simulation and --no-simulation exclude each other")
        }
        if connections.maxConnectionsPerUser < 1 || connections.maxConnections < 1 {
            throw ValidationError("--max-connections-per-user and --max-connections must be at least 1")
        }
        for (name, value) in [
            ("--prompt-timeout", promptTimeout), ("--prompt-queue-timeout", promptQueueTimeout),
            ("--context-lifetime", contextLifetime),
            ("--hello-timeout", connections.helloTimeout),
        ]
        where !(value.isFinite && value > 0 && value <= 86_400) {
            throw ValidationError("\(name) must be a number of seconds between 0 and 86400")
        }
    }

    func run() async throws {
        // Standard input, output and error are open (to /dev/null if the starter closed one), so
        // that no descriptor of the daemon's own takes their numbers: the handoff loop keeps those
        // three in its table of its own (`la_private_descriptor_table`), and must keep nothing else.
        for fd in STDIN_FILENO...STDERR_FILENO where fcntl(fd, F_GETFD) < 0 {
            _ = open("/dev/null", O_RDWR)
        }
        let parent = getppid()
        if let peerHelper { PeerHelper.serve(socket: peerHelper) }
        // A system daemon given the capabilities to read other users' processes (the packaged
        // unit's AmbientCapabilities=) hands them to its helper and runs again without them. Root
        // keeps its own (it is root whatever it gives up).
        if system, peerHelperSocket == nil, getuid() != 0, PeerHelper.holdsPeerCapabilities() != false {
            try PeerHelper.launchThenDropCapabilities(arguments: CommandLine.arguments)
        }
        // Every file the daemon creates is private to it, whatever made it forget a mode.
        umask(0o077)
        // No core file: a crash must not write the master key (and every key it derives) to disk.
        var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCore)
        let mode: DaemonMode = system ? .system : .user
        let level = Logger.Level(rawValue: logLevel) ?? .info
        if let logFile {
            let fd = open(logFile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            if fd >= 0 {
                dup2(fd, STDERR_FILENO)
                close(fd)
            }
        }
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = level
            return h
        }
        let logger = Logger(label: "laenclaved")
        // The configuration file, then the command line over it.
        let settingsPath =
            configFile ?? (mode == .system ? EnclavePaths.systemConfiguration : EnclavePaths.userConfiguration())
        let settings: SettingsFile
        do { settings = try DaemonSettings.read(settingsPath) } catch {
            throw ValidationError("\(settingsPath): \(error)")
        }
        // In user mode, the system's file too, for what only root may choose (a file it cannot
        // read, or that does not parse, chooses nothing here).
        let systemSettings =
            mode == .user && settingsPath != EnclavePaths.systemConfiguration
            ? try? DaemonSettings.read(EnclavePaths.systemConfiguration) : nil
        var commandLine = DaemonCommandLine(mode: mode)
        commandLine.socket = socket
        commandLine.stateDirectory = stateDirectory
        commandLine.keyFile = keyFile
        if let simulatedSensor {
            commandLine.sensor =
                switch simulatedSensor {
                case .touchid: .simulatedTouchID
                case .faceid: .simulatedFaceID
                case .none: DaemonSettings.Sensor.none
                }
        }
        if fprintd { commandLine.sensor = .fprintd }
        commandLine.passcodeSource = passcodeSource.flatMap(DaemonSettings.PasscodeSource.init(rawValue:))
        commandLine.pamService = pamService
        commandLine.pamUsers = pamUsers.map {
            Set($0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        }
        if let promptAgent {
            guard let agent = DaemonSettings.promptAgent(promptAgent) else {
                throw ValidationError("--prompt-agent is the agent's absolute path, or none")
            }
            commandLine.promptAgent = agent
        }
        if allowSimulation { commandLine.allowSimulation = true }
        if noSimulation { commandLine.allowSimulation = false }
        commandLine.passcodeCost = passcodeCost
        commandLine.passcodeMinimumLength = passcodeMinimumLength
        commandLine.promptTimeout = promptTimeout
        commandLine.promptQueueTimeout = promptQueueTimeout
        commandLine.contextLifetime = contextLifetime
        commandLine.helloTimeout = connections.helloTimeout
        commandLine.handoff = connections.handoff
        // Connections are descriptors: take what the limits need, and never promise more
        // connections than the descriptors allow (an accept loop out of descriptors spins).
        let descriptors = Self.raiseDescriptorLimit(
            to: ConnectionBudget.descriptors(forConnections: connections.maxConnections)
        )
        commandLine.connectionLimits = ConnectionBudget.Limits(
            perUser: connections.maxConnectionsPerUser,
            total: min(connections.maxConnections, ConnectionBudget.connections(forDescriptors: descriptors))
        )
        var defaults =
            mode == .system
            ? DaemonDefaultPaths(
                socket: EnclavePaths.systemSocket,
                stateDirectory: EnclavePaths.systemStateDirectory,
                masterKey: EnclavePaths.systemMasterKey
            )
            : DaemonDefaultPaths(
                socket: EnclavePaths.userSocket(),
                stateDirectory: EnclavePaths.userStateDirectory(),
                masterKey: EnclavePaths.userMasterKey()
            )
        defaults.promptAgent = Self.agentBesideDaemon()
        commandLine.administrationPipe = administrationPipe
        if let tpm {
            guard let setting = HardwareRoot.Setting(tpm) else {
                throw ValidationError(
                    "--tpm is " + HardwareRoot.Setting.expected
                )
            }
            commandLine.tpm = setting
        }
        commandLine.requireTPM = requireTPM
        commandLine.reanchor = reanchor
        commandLine.logindDirectory = sessions.logindDirectory
        let config = DaemonConfiguration.resolve(
            file: settings,
            systemFile: systemSettings,
            commandLine: commandLine,
            defaults: defaults
        )
        for warning in config.warnings { logger.warning("\(warning)") }
        if config.connectionLimits.total < connections.maxConnections {
            logger.warning(
                "the descriptor limit allows only \(config.connectionLimits.total) connections",
                metadata: ["asked": "\(connections.maxConnections)"]
            )
        }
        let daemon: EnclaveDaemon
        if peerHelperSocket != nil {
            // Fail closed: a daemon that still holds them (file capabilities on the binary, a
            // hand-given --peer-helper-socket) would serve with them.
            guard PeerHelper.holdsPeerCapabilities() == false else {
                logger.critical(
                    "this daemon still holds CAP_SYS_PTRACE or CAP_DAC_READ_SEARCH after handing them to its helper: not starting"
                )
                throw ExitCode(1)
            }
            logger.info("other users' processes are read by the privileged helper", metadata: ["capabilities": "none"])
        }
        let helper = peerHelperSocket.map { PeerHelperClient(socket: $0) }
        let oneShot = try oneShotFlag(config: config)
        let recoverySecret = recoverTPMRoot ? Self.readRecoverySecret() : nil
        do {
            daemon = try EnclaveDaemon(
                config: config,
                logger: logger,
                peerHelper: helper,
                recoverySecret: recoverySecret,
                issueRecovery: issueTPMRecovery,
                moveToTPM: moveToTPM
            )
        } catch let e as DaemonError where e.code == .alreadyRunning {
            // The recovery is done on a stopped daemon's state: said, not taken for done.
            if let oneShot {
                logger.critical("\(oneShot): \(e.description); stop it first")
                throw ExitCode(1)
            }
            logger.notice("\(e.description); exiting")
            return
        } catch {
            // Said in the log too (a daemon started with --log-file has no one reading its stderr).
            logger.critical("cannot start: \(error)")
            throw error
        }
        if let oneShot { return try finish(oneShot, daemon: daemon, logger: logger) }
        var services = EnclaveService.services(daemon: daemon, logger: logger)
        if exitWithParent {
            services.append(
                .init(service: ParentWatcher(parent: parent), successTerminationBehavior: .gracefullyShutdownGroup)
            )
        }
        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        )
        try await group.run()
    }
}
