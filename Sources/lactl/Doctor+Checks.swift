import ArgumentParser
import EnclaveClient
import EnclaveCore
import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The checks `lactl doctor` runs, each adding its lines to the report.
extension Doctor {
    func reportUser(_ uid: UInt32?, pid: Int32?, mode: DaemonMode, socketPath: String, into report: inout DoctorReport)
    {
        guard let uid else {
            return report.problem(
                "user",
                "the kernel did not report who runs the daemon",
                fix: "check with: ss -xlp | grep laenclaved"
            )
        }
        let who = "\(userName(uid)) (uid \(uid))"
        switch mode {
        case .user:
            if uid == getuid() {
                report.ok("user", "runs as you, \(who)")
            } else {
                report.problem(
                    "user",
                    "a user daemon run by \(who), not by you",
                    fix: "stop it and let your apps start your own (or use the system socket)"
                )
            }
        case .system:
            let directory = (socketPath as NSString).deletingLastPathComponent
            let owner = FileInfo(directory).stat?.st_uid
            if uid == 0 {
                report.ok("user", "runs as \(who); the packaged unit runs it as the dedicated user laenclaved")
            } else if owner == uid {
                report.ok("user", "runs as \(who), the owner of \(directory), so clients trust it")
            } else {
                report.problem(
                    "user",
                    "runs as \(who), but \(directory) belongs to \(owner.map(userName) ?? "nobody known"): clients refuse it",
                    fix: "sudo systemd-tmpfiles --create laenclaved.conf (makes \(directory) the daemon user's)"
                )
            }
        }
    }

    func checkSocketPermissions(_ path: String, mode: DaemonMode, daemonUID: UInt32?, into report: inout DoctorReport) {
        let directory = (path as NSString).deletingLastPathComponent
        guard let dir = FileInfo(directory).stat, let sock = FileInfo(path).stat else {
            return report.note("permissions", "\(directory) or its socket cannot be examined")
        }
        let dirMode = dir.st_mode & 0o7777
        let sockMode = sock.st_mode & 0o777
        let summary =
            "\(directory) \(octal(dirMode)) \(userName(dir.st_uid)), socket \(octal(sockMode)) \(userName(sock.st_uid))"
        var trouble: [String] = []
        var fix = ""
        switch mode {
        case .system:
            if dirMode & 0o022 != 0 {
                trouble.append("the directory is writable by others")
                fix = "sudo chmod 0755 \(directory)"
            }
            if dirMode & 0o001 == 0 {
                trouble.append("other users cannot reach the socket")
                fix = "sudo chmod 0755 \(directory)"
            }
            if sockMode & 0o002 == 0 {
                trouble.append("other users cannot connect (the socket needs mode 0666; the daemon decides by uid)")
                fix = "SocketMode=0666 in laenclaved.socket, then sudo systemctl restart laenclaved.socket"
            }
            if let daemonUID, daemonUID != 0, dir.st_uid != daemonUID {
                trouble.append("the directory is not the daemon user's")
                fix = "sudo systemd-tmpfiles --create laenclaved.conf"
            }
        case .user:
            if dirMode & 0o077 != 0 {
                trouble.append("the directory is open to others")
                fix = "chmod 0700 \(directory)"
            }
            if dir.st_uid != getuid() {
                trouble.append("the directory is not yours")
                fix = "remove \(directory) and let your apps start the daemon again"
            }
        }
        if trouble.isEmpty {
            report.ok("permissions", summary)
        } else {
            report.problem("permissions", summary + ": " + trouble.joined(separator: "; "), fix: fix)
        }
    }

    /// `created`: whether a daemon has run (then what it makes at start must exist).
    func checkState(mode: DaemonMode, daemonUID: UInt32?, created: Bool = true, into report: inout DoctorReport) {
        let state =
            stateDirectory ?? (mode == .system ? EnclavePaths.systemStateDirectory : EnclavePaths.userStateDirectory())
        let key = keyFile ?? (mode == .system ? EnclavePaths.systemMasterKey : EnclavePaths.userMasterKey())
        let owner = daemonUID ?? (mode == .system ? getpwnam("laenclaved").map { $0.pointee.pw_uid } : getuid())
        let tmpfilesFix = mode == .system ? "sudo systemd-tmpfiles --create laenclaved.conf" : nil
        checkPrivate(
            directory: state,
            file: state + "/enclave.sqlite",
            label: "state",
            owner: owner,
            created: created,
            missingFix: "the daemon creates it when it starts; if it runs with --state-dir, pass that here too",
            ownerFix: tmpfilesFix,
            into: &report
        )
        checkPrivate(
            directory: (key as NSString).deletingLastPathComponent,
            file: key,
            label: "master key",
            owner: owner,
            created: created,
            missingFix:
                "the daemon creates it when it starts (its user must own \((key as NSString).deletingLastPathComponent)); if it runs with --key-file, pass that here too",
            ownerFix: tmpfilesFix,
            into: &report
        )
    }

    /// A 0700 directory and a 0600 file in it, both the daemon's.
    func checkPrivate(
        directory: String,
        file: String,
        label: String,
        owner: UInt32?,
        created: Bool,
        missingFix: String,
        ownerFix: String?,
        into report: inout DoctorReport
    ) {
        let dir: stat
        switch FileInfo(directory) {
        case .missing where !created:
            return report.note(label, "\(directory) does not exist yet: the daemon makes it when it first starts")
        case .missing: return report.problem(label, "\(directory) does not exist", fix: missingFix)
        case .hidden(let e):
            return report.note(
                label,
                "\(directory) cannot be seen by you (\(String(cString: strerror(e)))); run lactl doctor as root"
            )
        case .present(let st): dir = st
        }
        let expectedOwner = owner.map { " \(userName($0))" } ?? ""
        if dir.st_mode & 0o077 != 0 || (owner != nil && dir.st_uid != owner) {
            return report.problem(
                label,
                "\(directory) is \(octal(dir.st_mode & 0o7777)) \(userName(dir.st_uid)); it must be 0700\(expectedOwner)",
                fix: ownerFix ?? "chmod 0700 \(directory)"
            )
        }
        switch FileInfo(file) {
        case .missing where !created:
            report.note(label, "\(file) does not exist yet: the daemon makes it when it first starts")
        case .missing:
            report.problem(label, "\(file) does not exist (\(directory) is 0700\(expectedOwner))", fix: missingFix)
        case .hidden:
            report.note(
                label,
                "\(directory) is 0700 \(userName(dir.st_uid)); \((file as NSString).lastPathComponent) inside cannot be seen by you (run lactl doctor as root)"
            )
        case .present(let st):
            if st.st_mode & 0o077 != 0 || (owner != nil && st.st_uid != owner) {
                report.problem(
                    label,
                    "\(file) is \(octal(st.st_mode & 0o777)) \(userName(st.st_uid)); it must be 0600\(expectedOwner)",
                    fix: "sudo chmod 0600 \(file)\(owner.map { "; sudo chown \(userName($0)) \(file)" } ?? "")"
                )
            } else {
                report.ok(
                    label,
                    "\(directory) 0700, \((file as NSString).lastPathComponent) \(octal(st.st_mode & 0o777)), \(userName(st.st_uid))"
                )
            }
        }
    }

    /// The graphical prompt: never a problem (a server has no session to draw in).
    func checkPromptAgent(_ s: UserStatus, into report: inout DoctorReport) {
        guard s.promptAgent != true else {
            return report.ok("prompt agent", "laenclaved-agent draws this session's prompts")
        }
        let environment = ProcessInfo.processInfo.environment
        let graphical = [environment["WAYLAND_DISPLAY"], environment["DISPLAY"]].contains { !($0 ?? "").isEmpty }
        let installed = ["/usr/bin/laenclaved-agent", "/usr/local/bin/laenclaved-agent"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        switch (graphical, installed) {
        case (true, nil):
            report.note(
                "prompt agent",
                "none serves this graphical session, and none is installed: prompts go to the terminal, or are headless "
                    + "(install the laenclaved-agent package, or scripts/install)"
            )
        case (true, let path?):
            report.note(
                "prompt agent",
                "none serves this graphical session: prompts go to the terminal, or are headless "
                    + "(start it: systemctl --user enable --now laenclaved-agent.service, or \(path) &)"
            )
        case (false, _):
            report.note("prompt agent", "no graphical session here: prompts go to the terminal, or are headless")
        }
    }

    func checkSensor(_ s: UserStatus, into report: inout DoctorReport) {
        let name = s.sensor.map { "\($0.name)\($0.simulated ? " (SIMULATED)" : "")" } ?? "none (device passcode only)"
        let simulated = s.sensor?.simulated == true
        switch s.mode {
        case _ where s.sensor != nil && !simulated && s.simulationEnabled:
            report.problem(
                "sensor",
                "⚠ \(name), simulated events accepted: `lactl simulate` passes the real reader's prompts",
                fix:
                    "remove allow-simulation from the configuration file and --allow-simulation from the daemon's command"
            )
        case .system where simulated || s.simulationEnabled:
            report.problem(
                "sensor",
                "⚠ \(name)\(s.simulationEnabled ? ", simulated events accepted" : ""): anyone who can queue events passes biometric checks",
                fix:
                    "remove --simulated-sensor and --allow-simulation from the daemon's command (sudo systemctl edit laenclaved.service)"
            )
        case .user where simulated:
            report.note("sensor", "\(name): the user daemon's default; touches can be scripted")
        default:
            if s.sensor == nil { report.note("sensor", name) } else { report.ok("sensor", name) }
        }
    }

    /// fprintd, the D-Bus system bus it answers on, and the optional PAM service file. They are
    /// problems only when the daemon uses a real reader; otherwise notes.
    func checkHostServices(readerInUse: Bool = false, into report: inout DoctorReport) {
        let fprintd = "/usr/libexec/fprintd"
        let hasFprintd = FileManager.default.isExecutableFile(atPath: fprintd)
        if hasFprintd {
            report.ok("fprintd", "\(fprintd) is installed")
        } else if readerInUse {
            report.problem(
                "fprintd",
                "\(fprintd) is not installed, but the daemon uses a fingerprint reader",
                fix: "sudo apt install fprintd"
            )
        } else {
            report.note(
                "fprintd",
                "\(fprintd) is not installed: needed only for a real fingerprint reader (sudo apt install fprintd)"
            )
        }
        var bus = "/run/dbus/system_bus_socket"
        if let address = ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"],
            let range = address.range(of: "unix:path=")
        {
            bus = String(address[range.upperBound...].prefix { $0 != "," && $0 != ";" })
        }
        if case .present(let st) = FileInfo(bus), (st.st_mode & S_IFMT) == S_IFSOCK {
            report.ok("d-bus", "the system bus socket \(bus) exists")
        } else if readerInUse {
            report.problem(
                "d-bus",
                "no system bus at \(bus): fprintd cannot be reached",
                fix: "sudo apt install dbus && sudo systemctl start dbus"
            )
        } else {
            report.note("d-bus", "no system bus at \(bus): needed only for fprintd")
        }
        let enabledFor = checkPAMModule(into: &report)
        checkPAMService(moduleEnabled: !enabledFor.isEmpty, into: &report)
    }

    /// The PAM service the system daemon would check passwords with: it must be password-only, or
    /// the daemon refuses its checks (`PAMStack`). A problem when the configuration uses PAM, or
    /// when the PAM module is enabled (its password is checked there).
    func checkPAMService(moduleEnabled: Bool, into report: inout DoctorReport) {
        let settings = (try? String(contentsOfFile: EnclavePaths.systemConfiguration, encoding: .utf8)).flatMap {
            try? DaemonSettings.parse($0)
        }
        let service = settings?.pamService ?? DaemonSettings().pamService
        let inUse = settings?.passcodeSource == .pam || moduleEnabled
        let path = "/etc/pam.d/\(service)"
        guard FileManager.default.fileExists(atPath: path) else {
            if inUse {
                report.problem(
                    "pam",
                    "\(path) is absent, and passcode-source = pam or pam_laenclave uses it",
                    fix: "sudo install -m 0644 packaging/laenclaved.pam \(path)"
                )
            } else {
                report.note(
                    "pam",
                    "\(path) is absent (used with passcode-source = pam and by pam_laenclave, see docs/configuration.md)"
                )
            }
            return
        }
        let stack = PAMStack.read(service: service, PAMStack.systemFile)
        let modules = stack.authModules.isEmpty ? "no auth module" : stack.authModules.joined(separator: ", ")
        if !stack.otherFactors.isEmpty {
            let detail =
                "\(path) can succeed without the password (\(stack.otherFactors.joined(separator: ", "))): the daemon refuses its checks, or a finger or token would count as the passcode"
            if inUse {
                report.problem(
                    "pam",
                    detail,
                    fix:
                        "make \(path) password-only: auth required pam_unix.so nodelay, account required pam_unix.so (the shipped file)"
                )
            } else {
                report.note("pam", detail + "; not in use (passcode-source is not pam, pam_laenclave is not enabled)")
            }
        } else if !stack.missing.isEmpty {
            report.note(
                "pam",
                "\(path) names files that do not exist: \(stack.missing.joined(separator: ", ")); auth modules: \(modules)"
            )
        } else {
            report.ok("pam", "\(path): password-only (\(modules))\(inUse ? "" : "; not in use")")
        }
    }
}

/// stat(2) of a path, telling a missing file from one the caller may not see.
enum FileInfo {
    case present(stat)
    case missing
    case hidden(Int32)

    init(_ path: String) {
        var st = Glibc.stat()
        if statPath(path, &st) == 0 {
            self = .present(st)
        } else if errno == ENOENT || errno == ENOTDIR {
            self = .missing
        } else {
            self = .hidden(errno)
        }
    }

    var stat: Glibc.stat? { if case .present(let st) = self { return st } else { return nil } }
}

/// stat(2) itself: inside `FileInfo` the name `stat` means its property.
func statPath(_ path: String, _ st: inout Glibc.stat) -> Int32 { stat(path, &st) }

func userName(_ uid: UInt32) -> String {
    guard let pw = getpwuid(uid) else { return "uid \(uid)" }
    return String(cString: pw.pointee.pw_name)
}

func octal(_ mode: mode_t) -> String {
    let text = String(mode, radix: 8)
    return String(repeating: "0", count: max(0, 4 - text.count)) + text
}
