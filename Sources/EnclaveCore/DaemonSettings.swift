import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the configuration file chooses (`/etc/laenclaved/laenclaved.conf` in system mode,
/// `$XDG_CONFIG_HOME/laenclaved/laenclaved.conf` in user mode): `key = value` lines, `#` comments.
/// Command-line options override the file. Parsing is pure; an unknown key or value is an error
/// naming its line, so a typo never silently weakens the configuration.
///
/// ```
/// sensor = auto              # auto | fprintd | simulated-touchid | simulated-faceid | none
/// passcode-source = enclave  # enclave | pam
/// pam-service = laenclaved   # the /etc/pam.d service that checks login passwords
/// pam-users = alice, bob     # only these users' passcode is their login password (default: all)
/// allow-simulation = no      # system mode: accept scripted touches and typed passcodes
/// prompt-agent = /usr/bin/laenclaved-agent   # the graphical prompt agent, or none
/// administration-pipe = no  # yes: administration may read the passcode from a pipe a client
///                           # hands (`lactl … --stdin`); taken only from a file only root can write
/// terminal-holders = /usr/bin/tmux, /usr/bin/xterm   # who may hold the other side of a terminal
///                           # administration is asked on (`TerminalHolders`); only from root's files
/// tpm = auto                # auto | off | device:/dev/tpmrm0 | swtpm:host=H,port=P: the root of a
///                           # new state (`HardwareRoot`)
/// require-tpm = no          # yes: never start without the TPM root
/// move-to-tpm = no          # yes: a software-root state moves to the TPM root at start, keeping
///                           # everything (`laenclaved --move-to-tpm` does it once, by hand)
/// handoff = always          # always | if-kernel-refuses | root | never: who may hand over a
///                           # terminal or piped secrets (`HandoffSocketSetting`)
/// ```
public struct DaemonSettings: Equatable, Sendable {
    public enum Sensor: String, Sendable, CaseIterable {
        /// fprintd when it has a reader; else a simulated Touch ID in user mode, none in system mode.
        case auto
        case fprintd
        case simulatedTouchID = "simulated-touchid"
        case simulatedFaceID = "simulated-faceid"
        case none
    }

    public enum PasscodeSource: String, Sendable, CaseIterable { case enclave, pam }

    public var sensor: Sensor = .auto
    public var passcodeSource: PasscodeSource = .enclave
    public var pamService = "laenclaved"
    public var pamUsers: Set<String>?
    public var allowSimulation: Bool?
    /// The executable admitted as the graphical prompt agent: nil, the one beside laenclaved;
    /// "" (`none`), no agent.
    public var promptAgent: String?
    /// `administration-pipe`: whether administration may read the person's passcode from a pipe a
    /// client hands (`DaemonConfiguration.administrationPipe` says when it counts).
    public var administrationPipe: Bool?
    /// `terminal-holders`: the programs (absolute paths) trusted to hold the other side of a
    /// terminal administration is asked on; nil: `TerminalHolders.defaultTrusted`.
    public var terminalHolders: Set<String>?
    /// `tpm`: the root of a new state; nil: `auto`.
    public var tpm: HardwareRoot.Setting?
    /// `require-tpm`.
    public var requireTPM: Bool?
    /// `move-to-tpm`.
    public var moveToTPM: Bool?
    /// `handoff`; nil: `always`.
    public var handoff: HandoffSocketSetting?

    public init() {}

    public static func parse(_ text: String) throws -> DaemonSettings {
        var settings = DaemonSettings()
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line =
                raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init)?
                .trimmingCharacters(in: .whitespaces) ?? ""
            if line.isEmpty { continue }
            let number = index + 1
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[0].isEmpty else {
                throw CoreError.settings(line: number, "expected key = value")
            }
            let (key, value) = (parts[0], parts[1])
            func choice<T: RawRepresentable & CaseIterable>(_ type: T.Type) throws -> T where T.RawValue == String {
                guard let v = T(rawValue: value) else {
                    throw CoreError.settings(
                        line: number,
                        "\(key) is one of \(T.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(value.prefix(40))\""
                    )
                }
                return v
            }
            func yesOrNo() throws -> Bool {
                switch value.lowercased() {
                case "yes", "true", "on": return true
                case "no", "false", "off": return false
                default: throw CoreError.settings(line: number, "\(key) is yes or no")
                }
            }
            switch key {
            case "sensor": settings.sensor = try choice(Sensor.self)
            case "passcode-source": settings.passcodeSource = try choice(PasscodeSource.self)
            case "pam-service":
                guard !value.isEmpty, value.count <= 64,
                    value.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) })
                else {
                    throw CoreError.settings(line: number, "pam-service is the name of a file in /etc/pam.d")
                }
                settings.pamService = value
            case "pam-users":
                let users = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                    !$0.isEmpty
                }
                guard !users.isEmpty else {
                    throw CoreError.settings(line: number, "pam-users lists user names, separated by commas")
                }
                settings.pamUsers = Set(users)
            case "allow-simulation": settings.allowSimulation = try yesOrNo()
            case "administration-pipe": settings.administrationPipe = try yesOrNo()
            case "terminal-holders":
                let paths = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                    !$0.isEmpty
                }
                guard !paths.isEmpty, paths.allSatisfy({ $0.hasPrefix("/") && !$0.hasSuffix("/") }) else {
                    throw CoreError.settings(
                        line: number,
                        "terminal-holders lists programs' absolute paths, separated by commas"
                    )
                }
                settings.terminalHolders = Set(paths)
            case "tpm":
                guard let setting = HardwareRoot.Setting(value) else {
                    throw CoreError.settings(
                        line: number,
                        "tpm is " + HardwareRoot.Setting.expected
                    )
                }
                settings.tpm = setting
            case "require-tpm": settings.requireTPM = try yesOrNo()
            case "move-to-tpm": settings.moveToTPM = try yesOrNo()
            case "handoff": settings.handoff = try choice(HandoffSocketSetting.self)
            case "prompt-agent":
                guard let agent = promptAgent(value) else {
                    throw CoreError.settings(line: number, "prompt-agent is the agent's absolute path, or none")
                }
                settings.promptAgent = agent
            default:
                throw CoreError.settings(
                    line: number,
                    "unknown setting \"\(key.prefix(40))\" (sensor, passcode-source, pam-service, pam-users, allow-simulation, prompt-agent, administration-pipe, terminal-holders, tpm, require-tpm, move-to-tpm, handoff)"
                )
            }
        }
        return settings
    }

    /// A `prompt-agent` value (the file's or `--prompt-agent`'s): the path, "" for `none`, nil when
    /// it is neither an absolute path to a file nor `none`.
    public static func promptAgent(_ value: String) -> String? {
        if value == "none" { return "" }
        return value.hasPrefix("/") && !value.hasSuffix("/") ? value : nil
    }

    /// The file at `path`, or the defaults when there is none.
    public static func load(_ path: String) throws -> DaemonSettings { try read(path).settings }

    /// The file at `path` (the defaults when there is none) and whether only root can write it —
    /// both read from the one open file, so a file swapped meanwhile is judged by what was read.
    public static func read(_ path: String) throws -> SettingsFile {
        // Non-blocking: a FIFO at the path must not hold the daemon's start.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return SettingsFile(settings: DaemonSettings(), onlyRootWrites: false) }
            throw CoreError.settings(line: 0, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw CoreError.settings(line: 0, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw CoreError.settings(line: 0, "\(path) is not a regular file")
        }
        let data: Data
        do { data = try handle.readToEnd() ?? Data() } catch {
            throw CoreError.settings(line: 0, "cannot read \(path): \(error.localizedDescription)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CoreError.settings(line: 0, "\(path) is not UTF-8 text")
        }
        return SettingsFile(
            settings: try parse(text),
            onlyRootWrites: status.st_uid == 0 && status.st_mode & 0o022 == 0
        )
    }
}

/// A configuration file as read, and whether only root can write it (owned by root, writable by
/// neither its group nor others): what only root may choose (`administration-pipe`) is taken
/// from such a file alone.
public struct SettingsFile: Equatable, Sendable {
    public var settings: DaemonSettings
    public var onlyRootWrites: Bool
    public init(settings: DaemonSettings, onlyRootWrites: Bool) {
        self.settings = settings
        self.onlyRootWrites = onlyRootWrites
    }
}
