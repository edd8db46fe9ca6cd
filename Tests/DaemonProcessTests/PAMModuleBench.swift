import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import Synchronization
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// What the PAM module's tests run against, all of it real and all of it removed afterwards:
/// `pam_laenclave.so` built from `pam/`, a throw-away user with a password, an enrolled finger
/// and a device passcode, a system daemon whose login-password service is a test PAM file, a
/// logind session of the test's own (a cgroup named `session-ID.scope`, which the kernel reports
/// for every process put in it, and logind's record of it in a directory the daemon is told to
/// read: there is no logind on a CI machine), and the PAM service that loads the module.
final class PAMModuleBench {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The module, built once per test process.
    static func module() throws -> String {
        try built.withLock { path in
            if let path { return path }
            let out = NSTemporaryDirectory() + "pam-module-\(getpid())/pam_laenclave.so"
            let build = try runProcess(
                "/bin/bash",
                [repository + "/scripts/build-pam-module", out],
                // This process's PATH holds the toolchain's clang where the machine has no cc.
                environment: [
                    "PATH": (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/bin:/bin",
                    "LA_PAM_WERROR": "1",
                ]
            )
            guard build.status == 0 else { throw BenchError("building the module failed: \(build.stderr)") }
            path = out
            return out
        }
    }
    private static let built = Mutex<String?>(nil)

    let user: String
    let password: String
    private(set) var uid: uid_t = 0
    private(set) var gid: gid_t = 0
    private(set) var enclave: TestEnclave!
    /// The PAM service that loads the module (`/etc/pam.d/<service>`).
    let service: String
    /// The test's logind session, local and on seat0.
    let session: String
    let logind: String
    let suffix = String(UInt32.random(in: 100_000...999_999))
    private var cleanups: [() -> Void] = []

    /// The daemon's own login-password service: pam_unix alone, without its failure delay.
    static let passwordOnlyStack = "auth required pam_unix.so nodelay\naccount required pam_unix.so\n"

    /// The prompt agent's executable the daemon admits, when the bench was asked for one: a copy
    /// the bench's user can run.
    private(set) var agent: String?

    /// `options`: what the module's line says after `socket=`. `agent`: the daemon admits a prompt
    /// agent (a copy of the built one, `agent`).
    /// `settings`: the daemon's settings file (root's, so its root-only settings count).
    /// `fprintd`: the daemon's reader is fprintd's virtual one on that stack, the finger enrolled
    /// there with the print "finger-A".
    init(
        options: String = "",
        agent withAgent: Bool = false,
        loginStack: String = PAMModuleBench.passwordOnlyStack,
        settings: String? = nil,
        fprintd: FprintdStack? = nil
    ) throws {
        let libraries = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib")) ?? []
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/pamtester"),
            FileManager.default.isExecutableFile(atPath: "/usr/sbin/useradd"),
            libraries.contains(where: { FileManager.default.fileExists(atPath: "/usr/lib/\($0)/security/pam_unix.so") }
            ),
            Self.cgroupRoot != nil
        else { throw XCTSkip("needs root, pamtester, useradd, pam_unix and a writable cgroup hierarchy") }
        user = "lapm\(suffix)"
        password = "Pw-" + UUID().uuidString
        service = "laenclave-test-\(suffix)"
        session = "lat\(suffix)"
        logind = NSTemporaryDirectory() + "logind-\(suffix)"
        // Everything is in place from here: whatever throws, deinit removes what was made.
        // Expiring tomorrow, with a random password: harmless if a killed run leaves it behind.
        XCTAssertEqual(
            try runProcess("/usr/sbin/useradd", ["-M", "-s", "/bin/sh", "-e", Self.tomorrow, user]).status,
            0
        )
        let name = user
        cleanups.append { _ = try? runProcess("/usr/sbin/userdel", [name]) }
        XCTAssertEqual(try runProcess("/usr/sbin/chpasswd", [], input: "\(user):\(password)\n").status, 0)
        guard let entry = getpwnam(user) else { throw BenchError("useradd made no \(user)") }
        (uid, gid) = (entry.pointee.pw_uid, entry.pointee.pw_gid)

        // The daemon's own login-password service, `loginStack`.
        let login = "laenclave-login-\(suffix)"
        try loginStack.write(toFile: "/etc/pam.d/\(login)", atomically: true, encoding: .utf8)
        cleanups.append { unlink("/etc/pam.d/\(login)") }

        try FileManager.default.createDirectory(atPath: logind + "/sessions", withIntermediateDirectories: true)
        let directory = logind
        cleanups.append { try? FileManager.default.removeItem(atPath: directory) }
        try stateSession(session, remote: false, seat: "seat0")

        var daemonArguments = ["--pam-service", login, "--logind-directory", logind]
        if let settings {
            let file = logind + "/laenclaved.conf"
            try settings.write(toFile: file, atomically: true, encoding: .utf8)
            chmod(file, 0o644)
            daemonArguments += ["--config", file]
        }
        if withAgent {
            let copy = logind + "/agent/laenclaved-agent"
            try FileManager.default.createDirectory(atPath: logind + "/agent", withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: productPath("laenclaved-agent"), toPath: copy)
            for path in [logind, logind + "/agent", copy] { chmod(path, 0o755) }
            agent = copy
            daemonArguments += ["--prompt-agent", copy]
        }
        if fprintd != nil { daemonArguments.append("--fprintd") }
        let arguments = daemonArguments
        enclave = try TestEnclave(
            .with {
                $0.systemMode = true
                $0.passcode = nil
                $0.enrolled = []
                $0.extraArguments = arguments
                if let fprintd {
                    $0.sensor = .none
                    $0.environment = fprintd.environment
                    $0.promptTimeout = 30
                }
            }
        )
        try writeModuleService(service, options: options)

        // The user's own device passcode and finger, set as the person would (on fprintd's
        // reader: one scan a stage, while lactl waits).
        XCTAssertEqual(try asUser(["passcode", "set", "--stdin"], input: "2468\n").status, 0)
        // fprintd's reader is armed only for a user logind says is at the machine.
        try fprintd?.addUserAtTheMachine(uid: uid, name: user)
        // (lactl's copy the passcode's call made.)
        let command = [
            "-u", user, "--", enclave.directory + "/lactl", "enroll",
            // fprintd names fingers its own way.
            fprintd == nil ? "right-index" : "right-index-finger", "--stdin", "--socket",
            enclave.socketPath,
        ]
        let enrolment = Background {
            try runProcess(
                "/usr/sbin/runuser",
                command,
                input: "2468\n",
                environment: ["PATH": "/usr/bin:/bin", "HOME": "/tmp"]
            )
        }
        if let fprintd {
            do { for _ in 0..<5 { try fprintd.device("SCAN finger-A") } } catch {
                let output = try? enrolment.wait()
                throw BenchError(
                    "enrolment on fprintd's reader: \(error); lactl: \(output?.stderr ?? "")\n\(enclave.log().suffix(3000))\n\(fprintd.log().suffix(2000))"
                )
            }
        }
        let enrolled = try enrolment.wait()
        XCTAssertEqual(enrolled.status, 0, enrolled.stderr)
        try fprintd?.waitUntilReleased()
    }

    deinit { stop() }

    func stop() {
        enclave?.stop()
        for cleanup in cleanups.reversed() { cleanup() }
        cleanups = []
    }

    /// `/etc/pam.d/<name>` loading the module against this daemon (or the one at `socket`), with `options`.
    func writeModuleService(_ name: String, options: String, socket: String? = nil) throws {
        let line = "auth required \(try Self.module()) socket=\(socket ?? enclave.socketPath) \(options)\n"
        try (line + "account required pam_permit.so\n").write(
            toFile: "/etc/pam.d/\(name)",
            atomically: true,
            encoding: .utf8
        )
        cleanups.append { unlink("/etc/pam.d/\(name)") }
    }

    /// logind's record of session `id` (whose: `owner`, by default the bench's user), and its cgroup.
    func stateSession(_ id: String, remote: Bool, seat: String?, owner: uid_t? = nil) throws {
        try "UID=\(owner ?? uid)\nACTIVE=1\nREMOTE=\(remote ? 1 : 0)\nSEAT=\(seat ?? "")\nTYPE=tty\n".write(
            toFile: "\(logind)/sessions/\(id)",
            atomically: true,
            encoding: .utf8
        )
        let cgroup = Self.cgroupRoot! + "/session-\(id).scope"
        if mkdir(cgroup, 0o755) == 0 { cleanups.append { Self.removeCgroup(cgroup) } }
    }

    /// A session's cgroup goes once its processes have (a terminal's last ones end with it).
    private static func removeCgroup(_ path: String) {
        let deadline = Date().addingTimeInterval(5)
        while rmdir(path) != 0 && errno == EBUSY && Date() < deadline {
            let procs = (try? String(contentsOfFile: path + "/cgroup.procs", encoding: .utf8)) ?? ""
            for pid in procs.split(separator: "\n").compactMap({ pid_t($0) }) { kill(pid, SIGKILL) }
            usleep(50_000)
        }
    }

    /// An expiry date for throw-away users: two days ahead, in UTC (pam_unix's own reading).
    static var tomorrow: String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: Date().addingTimeInterval(2 * 86_400))
    }

    /// The hierarchy `LoginSession` reads a process's session from: systemd's named one where
    /// there is one, else the unified one.
    static let cgroupRoot: String? = {
        for root in ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        where access(root + "/cgroup.procs", W_OK) == 0 {
            return root
        }
        return nil
    }()

    /// A shell command that puts itself in session `session` (nil: in none), then runs `command`.
    func inSession(_ session: String?, _ command: String) -> String {
        guard let session else { return command }
        return inCgroup("session-\(session).scope", command)
    }

    /// A shell command that puts itself in cgroup `path` (below the hierarchy's root), then runs `command`.
    func inCgroup(_ path: String, _ command: String) -> String {
        "echo $$ > '\(Self.cgroupRoot!)/\(path)/cgroup.procs' && \(command)"
    }

    /// A cgroup as the user's service manager's apps have (a terminal GNOME started:
    /// `…/user@UID.service/app.slice/….scope`), in no session; its path below the root.
    /// `owner`: whose service manager (default: the bench's user); `leaf`: the last cgroup's name,
    /// which a user chooses below their own service manager.
    func serviceManagerCgroup(owner: uid_t? = nil, leaf: String? = nil) throws -> String {
        let parts = [
            "la-test-\(suffix).slice", "user@\(owner ?? uid).service", "app.slice", leaf ?? "vte-spawn-\(suffix).scope",
        ]
        var path = ""
        for part in parts {
            path += (path.isEmpty ? "" : "/") + part
            let full = Self.cgroupRoot! + "/" + path
            if mkdir(full, 0o755) == 0 {
                cleanups.append { Self.removeCgroup(full) }
            } else if errno != EEXIST {
                throw BenchError("cannot make cgroup \(full)")
            }
        }
        return path
    }

    /// logind's record of the bench's user, naming `display` as its display session.
    func stateUser(display: String) throws {
        try FileManager.default.createDirectory(atPath: logind + "/users", withIntermediateDirectories: true)
        try "UID=\(uid)\nSTATE=active\nDISPLAY=\(display)\nSESSIONS=\(display)\n".write(
            toFile: "\(logind)/users/\(uid)",
            atomically: true,
            encoding: .utf8
        )
    }

    /// pamtester for `target` (default: the bench's user) on `service`, without a terminal (a new
    /// session with none: `setsid`), as `runAs` (default root), in logind session `session`.
    func pamtester(
        _ target: String? = nil,
        service: String? = nil,
        items: [String] = [],
        runAs: String? = nil,
        session: String?? = .none,
        input: String = "",
        timeout: Double = 80
    ) throws -> ProcessOutput {
        let arguments = pamtesterArguments(target, service: service, items: items, runAs: runAs, session: session)
        return try Self.runPamtester(arguments, input: input, timeout: timeout)
    }

    /// `setsid`'s arguments for `pamtester(…)`, to run elsewhere (a thread of its own).
    func pamtesterArguments(
        _ target: String? = nil,
        service: String? = nil,
        items: [String] = [],
        runAs: String? = nil,
        session: String?? = .none
    ) -> [String] {
        let items = items.map { "-I '\($0)'" }.joined(separator: " ")
        var command = "pamtester \(items) '\(service ?? self.service)' '\(target ?? user)' authenticate"
        if let runAs { command = "runuser -u '\(runAs)' -- \(command)" }
        return ["-w", "/bin/sh", "-c", inSession(session ?? self.session, "exec \(command)")]
    }

    /// `input`: what the conversation reads (typed answers, one per line).
    static func runPamtester(_ arguments: [String], input: String = "", timeout: Double = 80) throws -> ProcessOutput {
        try runProcess(
            "/usr/bin/setsid",
            arguments,
            input: input,
            environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin"],
            timeout: timeout
        )
    }

    /// pamtester as root for the bench's user on a terminal (tmux) in the bench's session: what
    /// the person sees and types.
    /// `afterwards`: a command run on the same terminal once pamtester has ended (its output in
    /// the same file).
    func pamtesterOnTerminal(
        service: String? = nil,
        asTheUser: Bool = false,
        afterwards: String? = nil
    ) throws -> TerminalCommand {
        let directory = try terminalDirectory()
        var command = "pamtester '\(service ?? self.service)' '\(user)' authenticate"
        if let afterwards { command = "sh -c \"\(command); \(afterwards)\"" }
        if asTheUser {
            // The user's own process (a lock screen): its session is put in place by root first.
            return try TerminalCommand(
                inSession(session, "setpriv --reuid=\(uid) --regid=\(gid) --clear-groups -- \(command)"),
                in: directory
            )
        }
        return try TerminalCommand(inSession(session, command), in: directory)
    }

    /// Where a terminal command keeps its output and status (anyone may write: the command may
    /// run as the bench's user), removed with the bench.
    private func terminalDirectory() throws -> String {
        let directory = NSTemporaryDirectory() + "pamterm-\(suffix)-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o777)
        cleanups.append { try? FileManager.default.removeItem(atPath: directory) }
        return directory
    }

    /// Real sudo for the bench's user through `name`, a PAM service of the test's own: a sudoers
    /// drop-in naming it (`Defaults:USER pam_service=`; the machine's /etc/pam.d/sudo is never
    /// touched), sudo's own timestamp off so every run asks PAM, and the module above pam_unix as
    /// pam-auth-update's profile puts it. Removed with the bench, sudo's timestamps too.
    func sudoService(_ name: String, options: String) throws {
        try stackAbovePamUnix(options: options).write(toFile: "/etc/pam.d/\(name)", atomically: true, encoding: .utf8)
        cleanups.append { unlink("/etc/pam.d/\(name)") }
        try sudoers(pamService: name)
    }

    /// A sudoers drop-in letting the bench's user run anything, asked through PAM service
    /// `pamService` (nil: sudo's own, `sudo`), with sudo's timestamp off so every run asks PAM.
    /// Removed with the bench, sudo's timestamps too.
    func sudoers(pamService: String?) throws {
        let dropIn = "/etc/sudoers.d/laenclave-test-\(suffix)"
        let service = pamService.map { "pam_service=\($0), " } ?? ""
        try "Defaults:\(user) \(service)timestamp_timeout=0, !lecture\n\(user) ALL=(ALL) ALL\n"
            .write(toFile: dropIn, atomically: true, encoding: .utf8)
        chmod(dropIn, 0o440)
        let name = user
        cleanups.append {
            unlink(dropIn)
            for directory in ["/run/sudo/ts", "/var/run/sudo/ts", "/var/lib/sudo/ts"] { unlink("\(directory)/\(name)") }
        }
        let check = try runProcess("/usr/sbin/visudo", ["-c", "-f", dropIn])
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
    }

    /// The daemon's own login-password service, rewritten: the daemon reads it at each check.
    func rewriteLoginService(_ stack: String) throws {
        try stack.write(toFile: "/etc/pam.d/laenclave-login-\(suffix)", atomically: true, encoding: .utf8)
    }

    /// A PAM service's stack as pam-auth-update's profile makes it: the module (with `options`)
    /// above pam_unix, which asks when the module steps aside.
    func stackAbovePamUnix(options: String) throws -> String {
        let module =
            "auth [success=done default=ignore maxtries=die] \(try Self.module()) socket=\(enclave.socketPath) \(options)"
        return
            "\(module)\nauth required pam_unix.so nodelay\naccount required pam_permit.so\nsession required pam_permit.so\n"
    }

    /// `command` (sudo) run by the bench's user on a terminal in the bench's session; in the mount
    /// namespace of process `owner`, if given.
    func asUserOnTerminal(_ command: String, inNamespaceOf owner: pid_t? = nil) throws -> TerminalCommand {
        let directory = try terminalDirectory()
        let enter = owner.map { "nsenter --mount=/proc/\($0)/ns/mnt " } ?? ""
        return try TerminalCommand(
            inSession(session, "\(enter)setpriv --reuid=\(uid) --regid=\(gid) --init-groups -- \(command)"),
            in: directory
        )
    }

    /// Another throw-away user, removed with the bench.
    func otherUser() throws -> (name: String, uid: uid_t) {
        let name = "lapo\(suffix)"
        XCTAssertEqual(
            try runProcess("/usr/sbin/useradd", ["-M", "-s", "/bin/sh", "-e", Self.tomorrow, name]).status,
            0
        )
        cleanups.append { _ = try? runProcess("/usr/sbin/userdel", [name]) }
        guard let entry = getpwnam(name) else { throw BenchError("useradd made no \(name)") }
        return (name, entry.pointee.pw_uid)
    }

    /// The bench user's status, as `lactl status --json` says it.
    func userStatus() throws -> String { try asUser(["status", "--json"]).stdout }

    /// The prompt agent, run by the bench's user in the bench's session on `display`, once it
    /// says it draws that session's prompts.
    func startAgent(on display: VirtualDisplay) throws -> AgentProcess {
        let agent = try AgentProcess(
            on: display,
            enclave: enclave,
            executable: try XCTUnwrap(self.agent, "the bench was made without an agent"),
            prefix: [
                "/bin/sh", "-c",
                inSession(
                    session,
                    "exec setpriv --reuid=\(uid) --regid=\(gid) --init-groups -- env HOME=/tmp \"$0\" \"$@\""
                ),
            ]
        )
        let deadline = Date().addingTimeInterval(20)
        while !agent.output.contains("drawing the prompts of") {
            guard Date() < deadline, agent.process.isRunning else {
                throw BenchError("the agent did not start serving: \(agent.output)")
            }
            usleep(50_000)
        }
        return agent
    }

    /// pamtester run with `arguments` (`pamtesterArguments`) while the agent draws its prompt on
    /// `display`: the login password typed into the window once it shows; what pamtester said.
    func passwordInTheAgentsWindow(
        _ arguments: [String],
        on display: VirtualDisplay,
        agent: AgentProcess
    ) throws -> ProcessOutput {
        let caller = Background { try PAMModuleBench.runPamtester(arguments) }
        let window = try XCTUnwrap(
            display.waitForWindow(titled: "confirm it is you"),
            "no prompt window; agent: \(agent.output)"
        )
        try display.type(password, into: window)
        try display.press("Return", in: window)
        return try caller.wait()
    }

    /// lactl as the bench's user against its daemon.
    func asUser(_ arguments: [String], input: String = "") throws -> ProcessOutput {
        let lactl = enclave.directory + "/lactl"
        if !FileManager.default.fileExists(atPath: lactl) {
            try FileManager.default.copyItem(atPath: productPath("lactl"), toPath: lactl)
            chmod(lactl, 0o755)
        }
        return try runProcess(
            "/usr/sbin/runuser",
            ["-u", user, "--", lactl] + arguments + ["--socket", enclave.socketPath],
            input: input,
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/tmp"]
        )
    }

    /// The daemon's audit entries of PAM authentications, newest first (root sees every user's),
    /// once there are `count` of them (entries are written in group commits, a moment after the
    /// answer; at most 5 s).
    func pamAudit(count: Int) throws -> [AuditEntry] {
        let deadline = Date().addingTimeInterval(5)
        while true {
            guard case .audit(let entries) = try enclave.send(.audit(.init(limit: 200, everyApp: false))) else {
                throw BenchError("no audit listing")
            }
            let pam = entries.filter { $0.operation == "pamAuthenticate" }
            if pam.count >= count || Date() > deadline { return pam }
            usleep(20_000)
        }
    }

    struct BenchError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

/// pamtester's words for each return code the module gives (pam_strerror's).
enum PAMResult {
    static let success = "successfully authenticated"
    static let authError = "Authentication failure"
    static let unavailable = "Authentication service cannot retrieve authentication info"
    static let maxTries = "Have exhausted maximum number of retries for service"
    static let permissionDenied = "Permission denied"
}
