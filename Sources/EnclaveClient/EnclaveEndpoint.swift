import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Which daemon a process talks to.
public struct EnclaveEndpoint: Sendable, Equatable {
    public var socketPath: String
    /// Start `laenclaved --user` when nothing answers (user mode only).
    public var autostart: Bool
    /// Never show a terminal prompt: input comes from simulated events only (tests, CI).
    public var headless: Bool

    /// `headless` defaults to what `$LA_PROMPT` asks for ("headless": never show a terminal prompt).
    public init(socketPath: String, autostart: Bool = false, headless: Bool? = nil) {
        self.socketPath = socketPath
        self.autostart = autostart
        self.headless = headless ?? Self.headlessRequested(EnclavePaths.processVariable)
    }

    static func headlessRequested(_ variable: (String) -> String?) -> Bool { variable("LA_PROMPT") == "headless" }

    /// Binds `LAContext`s created inside a task to a specific daemon (the testing kit uses this, so
    /// tests can run in parallel against isolated daemons).
    @TaskLocal public static var override: EnclaveEndpoint?

    /// The endpoint for this process: the task-local override, then `$LAENCLAVED_SOCKET`, then the
    /// system daemon's socket if one exists, else the user-mode daemon (auto-started). Resolved
    /// for every context, so it reads only the variables it needs, as they are now.
    public static func resolve() -> EnclaveEndpoint {
        if let o = override { return o }
        return resolve(variable: EnclavePaths.processVariable)
    }

    /// The same with `environment` in place of the process's.
    public static func resolve(environment: [String: String]) -> EnclaveEndpoint {
        if let o = override { return o }
        return resolve(variable: { environment[$0] })
    }

    private static func resolve(variable: (String) -> String?) -> EnclaveEndpoint {
        let headless = headlessRequested(variable)
        if let path = variable(EnclavePaths.socketEnvironmentKey), !path.isEmpty {
            return EnclaveEndpoint(socketPath: path, autostart: false, headless: headless)
        }
        if FileManager.default.fileExists(atPath: EnclavePaths.systemSocket) {
            return EnclaveEndpoint(socketPath: EnclavePaths.systemSocket, autostart: false, headless: headless)
        }
        return EnclaveEndpoint(
            socketPath: EnclavePaths.userSocket(variable: variable),
            autostart: true,
            headless: headless
        )
    }
}

/// One shared connection per socket per process, re-established when lost.
public enum EnclaveConnections {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var connections: [String: EnclaveConnection] = [:]

    /// The process's connection to `endpoint`'s daemon, made (and the user daemon started) when
    /// there is none. A failure is `EnclaveClientError.unavailable`, said once on standard error
    /// (`DaemonDiagnostics`).
    public static func shared(for endpoint: EnclaveEndpoint = .resolve()) throws -> EnclaveConnection {
        let made: Result<EnclaveConnection, DaemonUnavailability> = lock.withLock {
            if let c = connections[endpoint.socketPath], !c.closed { return .success(c) }
            do throws(DaemonUnavailability) {
                let c = try connect(endpoint)
                connections[endpoint.socketPath] = c
                return .success(c)
            } catch {
                return .failure(error)
            }
        }
        switch made {
        case .success(let c):
            DaemonDiagnostics.connected()
            return c
        case .failure(let problem):
            // Said outside the lock: a standard error nobody reads must not hold up other threads' calls.
            DaemonDiagnostics.report(problem)
            throw EnclaveClientError.unavailable(problem)
        }
    }

    /// Connects to `endpoint`'s daemon, starting the user daemon when none answers and the
    /// endpoint allows it.
    private static func connect(_ endpoint: EnclaveEndpoint) throws(DaemonUnavailability) -> EnclaveConnection {
        if let c = try greet(endpoint, nothingListeningIsAnswer: endpoint.autostart) { return c }
        try DaemonLauncher.startUserDaemon(
            socketPath: endpoint.socketPath,
            sought: DaemonUnavailability.sought(endpoint)
        )
        return try greet(endpoint, nothingListeningIsAnswer: false)!
    }

    /// The daemon at `endpoint`, greeted; nil when nothing listens there and that is an answer
    /// (a daemon may be started), else why it does not serve this process.
    private static func greet(
        _ endpoint: EnclaveEndpoint,
        nothingListeningIsAnswer: Bool
    ) throws(DaemonUnavailability) -> EnclaveConnection? {
        do {
            return try EnclaveConnection(socketPath: endpoint.socketPath)
        } catch EnclaveClientError.unreachable(let why) {
            if nothingListeningIsAnswer { return nil }
            throw .nothingListens(endpoint, why)
        } catch let error as EnclaveClientError {
            throw .refused(endpoint, error)
        } catch {
            throw .refused(endpoint, .protocolError("\(error)"))
        }
    }
}

/// Starts the user-mode daemon detached from the caller (its own session, stdio on /dev/null,
/// logs in the state directory), then waits for its socket.
public enum DaemonLauncher {
    /// Where an installed `laenclaved` is looked for after `$LAENCLAVED_PATH` and the app's own
    /// directory.
    public static let installedLocations = [
        "/usr/bin/laenclaved", "/usr/local/bin/laenclaved", "/usr/libexec/laenclaved",
    ]

    /// What `locate` found: the program to start, or why there is none.
    enum Located: Equatable {
        case installed(String)
        /// Programs were found, none of them installed.
        case notInstalled([String])
        case nothing
    }

    /// The daemon to start: `$LAENCLAVED_PATH`, else a `laenclaved` beside this program, else an
    /// installed location — and only if it is installed: a root-owned file in root-owned
    /// directories that nobody else can write, so no app (nor whoever set its environment) picks
    /// the program every app of the user will trust. Our rule; the testing kit starts its own
    /// daemon explicitly and is not concerned.
    static func locate(_ environment: [String: String]) -> Located {
        var refused: [String] = []
        for candidate in candidates(environment) where FileManager.default.isExecutableFile(atPath: candidate) {
            // The path checked is the path started: the resolved file, in root's directories, which
            // no one else can swap (a link the caller controls could be re-pointed in between).
            if let installed = InstalledProgram.resolved(candidate) { return .installed(installed) }
            refused.append(candidate)
        }
        return refused.isEmpty ? .nothing : .notInstalled(refused)
    }

    /// Why none was started, for a person: what was looked for and the command that fixes it.
    static func notStarted(_ located: Located, sought: String) -> DaemonUnavailability {
        switch located {
        case .installed(let path):
            return DaemonUnavailability(
                sought: sought,
                reason: "\(path) was found but not started",
                fix: "run it by hand to see why: \(path) --user"
            )
        case .nothing:
            return DaemonUnavailability(
                sought: sought,
                reason:
                    "none answers, and no laenclaved is installed to start (looked for $\(EnclavePaths.daemonEnvironmentKey), "
                    + "a laenclaved beside this program, \(installedLocations.joined(separator: ", ")))",
                fix: "install it (sudo bash scripts/install in a checkout of this package, or the laenclaved .deb), "
                    + "or run a development build yourself first (in a checkout of this package: swift build && .build/debug/laenclaved --user &)"
            )
        case .notInstalled(let refused):
            return DaemonUnavailability(
                sought: sought,
                reason:
                    "none answers, and \(refused.joined(separator: ", ")) is not started on an app's behalf: not an installed program "
                    + "(owned by root, writable by root alone, in root's directories)",
                fix:
                    "start it yourself: \(refused[0]) --user & (or install it: sudo bash scripts/install in a checkout of this package)"
            )
        }
    }

    /// The first `laenclaved` found in the same places, installed or not: for the testing kit,
    /// whose daemon serves only the test's own socket, which no other app trusts.
    public static func anyDaemonExecutable(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String? {
        candidates(environment).first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private static func candidates(_ environment: [String: String]) -> [String] {
        var candidates: [String] = []
        if let p = environment[EnclavePaths.daemonEnvironmentKey], !p.isEmpty { candidates.append(p) }
        if let me = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append((me as NSString).deletingLastPathComponent + "/laenclaved")
        }
        return candidates + installedLocations
    }

    /// Our note: this vets which program starts, not what any process of the same user could run
    /// itself — in user mode the user's own processes are trusted with the user's daemon
    /// (docs/architecture.md, "The trust line"); the system daemon is the boundary between apps.
    static func startUserDaemon(socketPath: String, sought: String) throws(DaemonUnavailability) {
        let located = locate(ProcessInfo.processInfo.environment)
        guard case .installed(let daemon) = located else { throw notStarted(located, sought: sought) }
        let state = EnclavePaths.userStateDirectory()
        try? FileManager.default.createDirectory(
            atPath: state,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let args = ["--user", "--socket", socketPath, "--log-file", state + "/laenclaved.log"]
        // The daemon is the user's, not the app's: it gets the variables that say where the user's
        // files and buses are, never the rest of whichever app happened to start it (a library to
        // preload, malloc debugging, the app's own secrets).
        let environment = ProcessInfo.processInfo.environment.filter { inheritedEnvironment.contains($0.key) }
            .merging(["PATH": "/usr/local/bin:/usr/bin:/bin"]) { $1 }
        let setsid = "/usr/bin/setsid"
        do {
            if FileManager.default.isExecutableFile(atPath: setsid) {
                let pid = try spawn(setsid, ["-f", daemon] + args, environment: environment, inherit: false)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
            } else {
                _ = try spawn(daemon, args, environment: environment, inherit: false)
            }
        } catch {
            throw DaemonUnavailability(
                sought: sought,
                reason: "none answers, and starting \(daemon) failed (\(error))",
                fix: "run it by hand to see why: \(daemon) --user"
            )
        }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let fd = try? EnclaveConnection.connectSocket(socketPath) {
                Glibc.close(fd)
                return
            }
            usleep(20_000)
        }
        throw DaemonUnavailability(
            sought: sought,
            reason: "\(daemon) was started but did not open the socket within 10 s",
            fix: "read its log: \(state)/laenclaved.log"
        )
    }

    /// Whether a path is an installed program (see `locate`).
    enum InstalledProgram {
        /// The absolute, link-free path of `path` when it is an installed program; nil otherwise.
        static func resolved(_ path: String) -> String? {
            guard let real = realpath(path, nil) else { return nil }
            defer { free(real) }
            let resolved = String(cString: real)
            var current = resolved
            var st = stat()
            guard lstat(current, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, rootOwnedAndClosed(st) else { return nil }
            while current != "/" {
                current = (current as NSString).deletingLastPathComponent
                if current.isEmpty { current = "/" }
                guard lstat(current, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, rootOwnedAndClosed(st) else {
                    return nil
                }
            }
            return resolved
        }

        private static func rootOwnedAndClosed(_ st: stat) -> Bool { st.st_uid == 0 && st.st_mode & 0o022 == 0 }
    }

    /// What a user daemon started on an app's behalf inherits from it.
    public static let inheritedEnvironment: Set<String> = [
        "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ",
        "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "DBUS_SYSTEM_BUS_ADDRESS", "DBUS_SESSION_BUS_ADDRESS",
    ]

    /// posix_spawn with standard input, output and error on /dev/null — standard error appended to
    /// the file `errorOutput` instead when given (created 0600): a crash's last words, for a test
    /// to show; `environment` adds to (or replaces entries of) this process's environment, or is
    /// the whole of it when `inherit` is false.
    public static func spawn(
        _ path: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        inherit: Bool = true,
        errorOutput: String? = nil
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for target in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
            if target == STDERR_FILENO, let errorOutput {
                posix_spawn_file_actions_addopen(&actions, target, errorOutput, O_WRONLY | O_CREAT | O_APPEND, 0o600)
                continue
            }
            posix_spawn_file_actions_addopen(
                &actions,
                target,
                "/dev/null",
                target == STDIN_FILENO ? O_RDONLY : O_WRONLY,
                0
            )
        }
        // A daemon must not keep its starter's descriptors (pipes would never see end-of-file).
        let limit = min(Int32(sysconf(Int32(_SC_OPEN_MAX))), 65536)
        for fd in 3..<max(limit, 3) where fcntl(fd, F_GETFD) >= 0 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        var merged = inherit ? ProcessInfo.processInfo.environment : [:]
        for (key, value) in environment { merged[key] = value }
        let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for variable in envp { free(variable) } }
        // The child starts with no signal blocked and every handler at its default: a spawn from a
        // Swift concurrency or Dispatch thread (whose signals are blocked) would otherwise hand
        // its mask on, and a daemon started so would never see SIGTERM.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let rc = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard rc == 0 else {
            throw EnclaveClientError.unreachable("could not start \(path): \(String(cString: strerror(rc)))")
        }
        return pid
    }
}
