import EnclaveCore
import EnclaveProtocol
import XCTest

/// The merge of the configuration file, the command line over it, and the mode's defaults.
final class DaemonConfigurationTests: XCTestCase {
    private let userPaths = DaemonDefaultPaths(
        socket: "/run/user/1000/laenclaved/socket",
        stateDirectory: "/home/a/.local/share/laenclaved",
        masterKey: "/home/a/.config/laenclaved/master.key",
        promptAgent: "/usr/bin/laenclaved-agent"
    )
    private let systemPaths = DaemonDefaultPaths(
        socket: "/run/laenclaved/socket",
        stateDirectory: "/var/lib/laenclaved",
        masterKey: "/etc/laenclaved/master.key"
    )

    private func resolve(
        _ mode: DaemonMode,
        file: String = "",
        _ change: (inout DaemonCommandLine) -> Void = { _ in }
    ) throws -> DaemonConfiguration {
        var commandLine = DaemonCommandLine(mode: mode)
        change(&commandLine)
        return DaemonConfiguration.resolve(
            file: SettingsFile(settings: try DaemonSettings.parse(file), onlyRootWrites: false),
            commandLine: commandLine,
            defaults: mode == .system ? systemPaths : userPaths
        )
    }

    func testTheModesDefaults() throws {
        let user = try resolve(.user)
        XCTAssertEqual(user.socketPath, userPaths.socket)
        XCTAssertEqual(user.stateDirectory, userPaths.stateDirectory)
        XCTAssertEqual(user.masterKeyPath, userPaths.masterKey)
        XCTAssertEqual(user.simulatedSensor, .touchID, "auto falls back to a simulated Touch ID in user mode")
        XCTAssertEqual(user.fprintd, .ifAvailable)
        XCTAssertTrue(user.simulationEnabled)
        XCTAssertNil(user.pamService)
        XCTAssertEqual(user.passcodeCost, PasscodeVerifier.defaultCost)
        XCTAssertEqual(user.warnings, [])

        let system = try resolve(.system)
        XCTAssertEqual(system.socketPath, systemPaths.socket)
        XCTAssertNil(system.simulatedSensor, "auto never falls back to a simulator in system mode")
        XCTAssertEqual(system.fprintd, .ifAvailable)
        XCTAssertFalse(system.simulationEnabled)
        XCTAssertEqual(system.warnings, [])
    }

    /// Each row: the file's `sensor`, the command line's, and what runs.
    func testTheSensor() throws {
        let rows:
            [(
                file: String?, commandLine: DaemonSettings.Sensor?, mode: DaemonMode, simulated: BiometryKind?,
                fprintd: DaemonConfiguration.FprintdUse
            )] = [
                (nil, nil, .user, .touchID, .ifAvailable),
                ("fprintd", nil, .user, nil, .required),
                ("simulated-faceid", nil, .user, .faceID, .no),
                ("simulated-faceid", .fprintd, .user, nil, .required),
                ("fprintd", .simulatedTouchID, .user, .touchID, .no),
                ("fprintd", DaemonSettings.Sensor.none, .user, nil, .no),
                ("none", nil, .system, nil, .no),
                ("auto", nil, .system, nil, .ifAvailable),
                ("simulated-touchid", nil, .system, .touchID, .no),
            ]
        for row in rows {
            let config = try resolve(row.mode, file: row.file.map { "sensor = \($0)" } ?? "") {
                $0.sensor = row.commandLine
            }
            XCTAssertEqual(config.simulatedSensor, row.simulated, "\(row)")
            XCTAssertEqual(config.fprintd, row.fprintd, "\(row)")
        }
    }

    func testASimulatedSensorInSystemModeIsLoud() throws {
        XCTAssertEqual(try resolve(.system, file: "sensor = simulated-faceid").warnings.count, 1)
        XCTAssertEqual(try resolve(.system) { $0.sensor = .simulatedTouchID }.warnings.count, 1)
        XCTAssertEqual(
            try resolve(.user, file: "sensor = simulated-faceid").warnings,
            [],
            "user mode simulates by default"
        )
    }

    func testSimulationFollowsTheModeUnlessSaidOtherwise() throws {
        XCTAssertFalse(try resolve(.user) { $0.allowSimulation = false }.simulationEnabled)
        XCTAssertTrue(try resolve(.system, file: "allow-simulation = yes").simulationEnabled)
        XCTAssertFalse(
            try resolve(.system, file: "allow-simulation = yes") { $0.allowSimulation = false }.simulationEnabled,
            "the command line wins"
        )
        XCTAssertTrue(try resolve(.user, file: "allow-simulation = no") { $0.allowSimulation = true }.simulationEnabled)
    }

    /// With a real reader, scripted input only when the administrator said so — then loudly.
    func testARealReaderAcceptsScriptedInputOnlyWhenSimulationWasTurnedOnExplicitly() throws {
        let cases:
            [(mode: DaemonMode, file: String, flag: Bool?, simulatedSensor: Bool, realSensor: Bool, warned: Bool)] = [
                (.user, "", nil, true, false, false),
                (.user, "allow-simulation = no", nil, false, false, false),
                (.user, "allow-simulation = yes", nil, true, true, true),
                (.user, "", true, true, true, true),
                (.user, "allow-simulation = yes", false, false, false, false),
                (.system, "", nil, false, false, false),
                (.system, "", true, true, true, true),
            ]
        for c in cases {
            let config = try resolve(c.mode, file: c.file) { $0.allowSimulation = c.flag }
            let why = "\(c.mode) file \"\(c.file)\" flag \(String(describing: c.flag))"
            XCTAssertEqual(config.simulationAccepted(realSensor: false), c.simulatedSensor, why)
            XCTAssertEqual(config.simulationAccepted(realSensor: true), c.realSensor, why)
            XCTAssertEqual(
                config.sensorWarnings(realSensor: true).contains { $0.contains("REAL FINGERPRINT READER") },
                c.warned,
                why
            )
            XCTAssertEqual(config.sensorWarnings(realSensor: false), [], why)
        }
    }

    func testPAMSettingsApplyOnlyWhenPAMIsThePasscodeSource() throws {
        let notPAM = try resolve(.system, file: "pam-service = login\npam-users = alice")
        XCTAssertNil(notPAM.pamService, "a PAM service alone does not make PAM the source")
        XCTAssertNil(notPAM.pamUsers)
        XCTAssertEqual(
            notPAM.loginPasswordService,
            "login",
            "it still checks login passwords (lifting a disabled passcode)"
        )
        XCTAssertEqual(try resolve(.user).loginPasswordService, "laenclaved")

        let fromFile = try resolve(.system, file: "passcode-source = pam\npam-users = alice, bob")
        XCTAssertEqual(fromFile.pamService, "laenclaved")
        XCTAssertEqual(fromFile.pamUsers, ["alice", "bob"])

        let overridden = try resolve(.system, file: "passcode-source = pam\npam-service = login") {
            $0.pamService = "laenclaved-test"
            $0.pamUsers = ["carol"]
        }
        XCTAssertEqual(overridden.pamService, "laenclaved-test")
        XCTAssertEqual(overridden.pamUsers, ["carol"])

        XCTAssertNil(try resolve(.system, file: "passcode-source = pam") { $0.passcodeSource = .enclave }.pamService)
        XCTAssertEqual(try resolve(.user) { $0.passcodeSource = .pam }.pamService, "laenclaved")
    }

    func testTheCommandLinesPathsAndTimes() throws {
        let config = try resolve(.user) {
            $0.socket = "/tmp/s"
            $0.stateDirectory = "/tmp/state"
            $0.keyFile = "/tmp/key"
            $0.passcodeCost = 10
            $0.promptTimeout = 5
            $0.promptQueueTimeout = 2
            $0.contextLifetime = 60
        }
        XCTAssertEqual(
            [config.socketPath, config.stateDirectory, config.masterKeyPath],
            ["/tmp/s", "/tmp/state", "/tmp/key"]
        )
        XCTAssertEqual(config.passcodeCost, 10)
        XCTAssertEqual([config.promptTimeout, config.promptQueueTimeout, config.contextLifetime], [5, 2, 60])
    }

    /// Each row: the file's `prompt-agent`, the command line's, and the agent admitted.
    func testThePromptAgent() throws {
        let rows: [(file: String, commandLine: String?, admitted: String?)] = [
            ("", nil, "/usr/bin/laenclaved-agent"),
            ("prompt-agent = none", nil, nil),
            ("prompt-agent = /opt/la/agent", nil, "/opt/la/agent"),
            ("prompt-agent = /opt/la/agent", "", nil),
            ("prompt-agent = none", "/srv/agent", "/srv/agent"),
            ("", "/srv/agent", "/srv/agent"),
        ]
        for row in rows {
            let config = try resolve(.user, file: row.file) { $0.promptAgent = row.commandLine }
            XCTAssertEqual(config.promptAgentPath, row.admitted, "\(row)")
        }
        XCTAssertNil(try resolve(.system).promptAgentPath, "no agent beside a daemon that has none in its defaults")
    }

    /// `handoff`: the file's, the command line over it; served always when neither says.
    func testTheHandoffSocket() throws {
        let rows: [(file: String, commandLine: HandoffSocketSetting?, chosen: HandoffSocketSetting)] = [
            ("", nil, .always),
            ("handoff = never", nil, .never),
            ("handoff = if-kernel-refuses", nil, .ifKernelRefuses),
            ("handoff = never", .always, .always),
            ("", .ifKernelRefuses, .ifKernelRefuses),
            ("handoff = root", nil, .root),
        ]
        for row in rows {
            for mode in [DaemonMode.user, .system] {
                let config = try resolve(mode, file: row.file) { $0.handoff = row.commandLine }
                XCTAssertEqual(config.handoff, row.chosen, "\(mode) \(row)")
            }
        }
    }

    /// Who may let administration read the passcode from a pipe: root's file (the system's; a
    /// system daemon's own), or the daemon's starter; never a user-mode daemon's own file, nor one
    /// others may write.
    func testOnlyRootOrTheStarterLetsAdministrationReadAPipe() throws {
        let yes = try DaemonSettings.parse("administration-pipe = yes")
        let no = try DaemonSettings.parse("administration-pipe = no")
        let unset = DaemonSettings()
        let rows:
            [(
                mode: DaemonMode, file: SettingsFile, system: SettingsFile?, flag: Bool, allowed: Bool, warned: Bool,
                why: String
            )] = [
                (.user, .init(settings: unset, onlyRootWrites: false), nil, false, false, false, "nothing says so"),
                (
                    .system, .init(settings: yes, onlyRootWrites: true), nil, false, true, false,
                    "a system daemon's root file"
                ),
                (
                    .system, .init(settings: yes, onlyRootWrites: false), nil, false, false, true,
                    "a system daemon's file others may write"
                ),
                (.user, .init(settings: yes, onlyRootWrites: false), nil, false, false, true, "the user's file"),
                (
                    .user, .init(settings: yes, onlyRootWrites: true), nil, false, false, true,
                    "a root-owned file a user daemon was pointed at"
                ),
                (
                    .user, .init(settings: unset, onlyRootWrites: false), .init(settings: yes, onlyRootWrites: true),
                    false, true, false, "the system's file, in user mode"
                ),
                (
                    .user, .init(settings: unset, onlyRootWrites: false), .init(settings: yes, onlyRootWrites: false),
                    false, false, false, "a system file others may write"
                ),
                (
                    .user, .init(settings: yes, onlyRootWrites: false), .init(settings: no, onlyRootWrites: true),
                    false, false, true, "the system says no; the user's yes is ignored"
                ),
                (.user, .init(settings: unset, onlyRootWrites: false), nil, true, true, false, "--administration-pipe"),
            ]
        for row in rows {
            var commandLine = DaemonCommandLine(mode: row.mode)
            commandLine.administrationPipe = row.flag
            let config = DaemonConfiguration.resolve(
                file: row.file,
                systemFile: row.system,
                commandLine: commandLine,
                defaults: row.mode == .user ? userPaths : systemPaths
            )
            XCTAssertEqual(config.administrationPipe, row.allowed, row.why)
            XCTAssertEqual(config.warnings.contains { $0.contains("administration-pipe") }, row.warned, row.why)
        }
    }

    /// The programs trusted to hold a terminal's other side are root's to list, like the pipe.
    func testOnlyRootListsTheTerminalHolders() throws {
        let listed = try DaemonSettings.parse("terminal-holders = /usr/bin/tmux, /opt/term/bin/term")
        for (file, system, expected, warned) in [
            (SettingsFile(settings: listed, onlyRootWrites: true), nil, TerminalHolders.defaultTrusted, true),
            (SettingsFile(settings: listed, onlyRootWrites: false), nil, TerminalHolders.defaultTrusted, true),
            (
                SettingsFile(settings: DaemonSettings(), onlyRootWrites: false),
                SettingsFile(settings: listed, onlyRootWrites: true), Set(["/usr/bin/tmux", "/opt/term/bin/term"]),
                false
            ),
        ] as [(SettingsFile, SettingsFile?, Set<String>, Bool)] {
            let config = DaemonConfiguration.resolve(
                file: file,
                systemFile: system,
                commandLine: DaemonCommandLine(mode: .user),
                defaults: userPaths
            )
            XCTAssertEqual(config.terminalHolders, expected)
            XCTAssertEqual(config.warnings.contains { $0.contains("terminal-holders is ignored") }, warned)
        }
        XCTAssertThrowsError(try DaemonSettings.parse("terminal-holders = tmux"), "a path, not a name")
    }

    /// The master secret's root: `auto` for the system daemon and `off` for a user-mode one unless
    /// chosen; a system daemon takes it from root's file only, a user daemon from its own; the
    /// command line wins; requiring the TPM counts from anywhere.
    func testTheRootIsTheMachinesTPMForTheSystemDaemonAndASystemDaemonsIsRoots() throws {
        let sim = HardwareRoot.Setting.tcti("swtpm:host=127.0.0.1,port=2321")
        let chosen = try DaemonSettings.parse(
            "tpm = swtpm:host=127.0.0.1,port=2321\nrequire-tpm = yes\nmove-to-tpm = yes"
        )
        typealias Row = (DaemonMode, SettingsFile, HardwareRoot.Setting?, HardwareRoot.Setting, Bool, Bool, String)
        let rows: [Row] = [
            (.user, .init(settings: DaemonSettings(), onlyRootWrites: false), nil, .off, false, false, "the default"),
            (
                .system, .init(settings: DaemonSettings(), onlyRootWrites: true), nil, .auto, false, false,
                "the system default"
            ),
            (.user, .init(settings: chosen, onlyRootWrites: false), nil, sim, true, false, "the user's own file"),
            (.system, .init(settings: chosen, onlyRootWrites: true), nil, sim, true, false, "root's file"),
            (
                .system, .init(settings: chosen, onlyRootWrites: false), nil, .auto, true, true,
                "a file others may write"
            ),
            (.system, .init(settings: chosen, onlyRootWrites: false), .auto, .auto, true, true, "--tpm"),
        ]
        for (mode, file, flag, expected, required, warned, why) in rows {
            var commandLine = DaemonCommandLine(mode: mode)
            commandLine.tpm = flag
            let config = DaemonConfiguration.resolve(
                file: file,
                commandLine: commandLine,
                defaults: mode == .system ? systemPaths : userPaths
            )
            XCTAssertEqual(config.tpm, expected, why)
            XCTAssertEqual(config.requireTPM, required, why)
            // The move goes with the root: root's to choose for a system daemon.
            XCTAssertEqual(config.moveToTPM, file.settings.moveToTPM == true && expected == sim, why)
            XCTAssertEqual(
                config.warnings.contains { $0.contains("move-to-tpm is ignored") },
                warned,
                "\(why): \(config.warnings)"
            )
            XCTAssertEqual(
                config.warnings.contains { $0.hasPrefix("tpm is ignored") },
                warned,
                "\(why): \(config.warnings)"
            )
        }
    }
}
