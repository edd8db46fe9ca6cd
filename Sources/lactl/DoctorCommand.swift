import ArgumentParser
import EnclaveClient
import EnclaveCore
import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `lactl doctor`: what an administrator checks after installing (or when an app says the daemon
/// is unreachable), one line each — `ok`, `problem` (with a one-line fix) or `note` (optional, or
/// not visible to the caller). Exits 0 when there is no problem, 1 otherwise.
struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Check the installation: socket, daemon, its user, permissions, state, key, sensor, prompt agent, fprintd, D-Bus, PAM.",
        discussion: """
            Each line is ok, problem (followed by a fix) or note (optional, or not visible to you). \
            Exit status: 0 when there is no problem, 1 otherwise. Run it as root (sudo lactl doctor) to \
            include the system daemon's state directory, database and key file.
            """
    )

    @OptionGroup var client: ClientOptions
    @Option(
        name: .customLong("state-dir"),
        help: "The daemon's state directory, when it is not the default of its mode."
    )
    var stateDirectory: String?
    @Option(
        name: .customLong("key-file"),
        help: "The daemon's master key file, when it is not the default of its mode."
    )
    var keyFile: String?

    func run() throws {
        var report = DoctorReport()
        diagnose(into: &report)
        if report.problems > 0 {
            print("\(report.problems) problem(s)")
            throw ExitCode(1)
        }
        print("no problem found")
    }

    private func diagnose(into report: inout DoctorReport) {
        let endpoint = client.endpoint()
        let path = endpoint.socketPath
        let isSystemSocket = path == EnclavePaths.systemSocket
        // Which socket apps use, and why.
        let origin: String
        if client.socket != nil {
            origin = "given with --socket"
        } else if let env = ProcessInfo.processInfo.environment[EnclavePaths.socketEnvironmentKey], !env.isEmpty {
            origin = "from $\(EnclavePaths.socketEnvironmentKey)"
        } else if isSystemSocket {
            origin = "the system daemon's: apps of every user use it"
        } else {
            origin = "the user daemon's (no system socket at \(EnclavePaths.systemSocket))"
        }
        let socketInfo = FileInfo(path)
        switch socketInfo {
        case .missing where endpoint.autostart:
            report.note("socket", "\(path): \(origin); the user daemon is not running, apps start it on first use")
            report.note(
                "system",
                "no system daemon: to serve every user, install the package (README: \"Installing as a system service\")"
            )
            // Nothing more to check without a daemon; the state of a user daemon is still worth a look.
            checkState(mode: .user, daemonUID: getuid(), created: false, into: &report)
            checkHostServices(into: &report)
            return
        case .missing:
            report.problem(
                "socket",
                "\(path) (\(origin)) does not exist",
                fix: isSystemSocket
                    ? "sudo systemctl enable --now laenclaved.socket"
                    : "start the daemon, or pass the socket it listens on with --socket"
            )
            checkHostServices(into: &report)
            return
        case .hidden(let e):
            report.problem(
                "socket",
                "\(path) cannot be examined: \(String(cString: strerror(e)))",
                fix:
                    "the directory of the socket must be searchable by every user (chmod 0755 \((path as NSString).deletingLastPathComponent))"
            )
            checkHostServices(into: &report)
            return
        case .present(let st) where (st.st_mode & S_IFMT) != S_IFSOCK:
            report.problem(
                "socket",
                "\(path) exists but is not a socket",
                fix: "remove it and restart the daemon (sudo systemctl restart laenclaved.socket)"
            )
            checkHostServices(into: &report)
            return
        case .present:
            report.ok("socket", "\(path): \(origin)")
        }

        // Who answers: the kernel's word (SO_PEERCRED), before saying anything to it.
        var credentials: PeerCredentials?
        do {
            credentials = try Self.listenerCredentials(path)
        } catch {
            report.problem(
                "daemon",
                "nothing answers at \(path): \(error)",
                fix: isSystemSocket
                    ? "sudo systemctl restart laenclaved.socket; journalctl -u laenclaved says why it stopped"
                    : "remove the stale socket (rm \(path)); apps start the user daemon again"
            )
            checkSocketPermissions(path, mode: isSystemSocket ? .system : .user, daemonUID: nil, into: &report)
            checkHostServices(into: &report)
            return
        }
        var daemonUID = credentials?.uid
        let connection: EnclaveConnection
        do {
            connection = try EnclaveConnection(socketPath: path)
        } catch {
            let mode: DaemonMode = isSystemSocket ? .system : .user
            // A daemon that refuses a client says why in a reply to no request, then closes: the
            // connection only reports the loss, so listen (without saying anything) for the reason.
            let refusal: String?
            switch error as? EnclaveClientError {
            case .failure(let f)?: refusal = f.message
            case .connectionLost?: refusal = Self.refusal(at: path)
            default: refusal = nil
            }
            if let refusal, refusal.contains("could not identify"), refusal.contains("cannot read the client process") {
                report.problem(
                    "daemon",
                    "it refuses this client: \(refusal) (it cannot read /proc/PID of other users' processes)",
                    fix:
                        "give the daemon CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (the packaged unit's AmbientCapabilities=) or run it as root"
                )
            } else if let refusal, refusal.contains("sock_diag") {
                report.problem(
                    "daemon",
                    "it refuses this client: \(refusal)",
                    fix:
                        "the daemon needs AF_NETLINK sockets (sock_diag, module unix_diag) in the network namespace of its listening socket: "
                        + "no PrivateNetwork=, and RestrictAddressFamilies=AF_UNIX AF_NETLINK"
                )
            } else if let refusal {
                report.problem(
                    "daemon",
                    "it refuses this client: \(refusal)",
                    fix: "use a daemon that serves you: the system daemon, or your own user daemon"
                )
            } else if case .untrustedDaemon? = error as? EnclaveClientError {
                report.problem(
                    "daemon",
                    "\(error)",
                    fix:
                        "the system daemon must run as root or as the owner of \((path as NSString).deletingLastPathComponent) (sudo systemd-tmpfiles --create laenclaved.conf)"
                )
            } else {
                report.problem(
                    "daemon",
                    "\(error)",
                    fix: isSystemSocket
                        ? "journalctl -u laenclaved says what the daemon did"
                        : "see laenclaved.log in your state directory"
                )
            }
            reportUser(daemonUID, pid: credentials?.pid, mode: mode, socketPath: path, into: &report)
            checkSocketPermissions(path, mode: mode, daemonUID: daemonUID, into: &report)
            checkState(mode: mode, daemonUID: daemonUID, into: &report)
            checkHostServices(into: &report)
            return
        }
        defer { connection.close() }
        // Socket activation: a connection made before the daemon started reports whoever called
        // listen() first — systemd (pid 1, root). The daemon listens again when it starts; ask anew.
        if let c = credentials, c.pid == 1 || c.uid == 0, let again = try? Self.listenerCredentials(path) {
            credentials = again
            daemonUID = again.uid
        }
        let mode = connection.hello.mode
        report.ok(
            "daemon",
            "answers (protocol \(connection.hello.version), \(mode.rawValue) mode\(credentials.map { ", pid \($0.pid)" } ?? ""))"
        )
        reportUser(daemonUID, pid: credentials?.pid, mode: mode, socketPath: path, into: &report)
        checkSocketPermissions(path, mode: mode, daemonUID: daemonUID, into: &report)
        checkState(mode: mode, daemonUID: daemonUID, into: &report)
        // The sensor, from the daemon itself (what `lactl status` shows).
        var readerInUse = false
        do {
            guard case .status(let s) = try connection.request(.status) else {
                throw EnclaveClientError.protocolError("no status")
            }
            checkSensor(s, into: &report)
            checkPasscodeLength(s, into: &report)
            checkEnrolmentElsewhere(s, into: &report)
            checkPromptAgent(s, into: &report)
            checkRoot(s, into: &report)
            readerInUse = s.sensor.map { !$0.simulated } ?? false
            checkHandoff(connection, mode: mode, socketPath: path, into: &report)
        } catch {
            report.problem(
                "sensor",
                "the daemon did not say: \(error)",
                fix: "lactl status shows the daemon's answer; journalctl -u laenclaved its log"
            )
        }
        checkHostServices(readerInUse: readerInUse, into: &report)
    }

    /// SO_PEERCRED of a connection to `path`: the process that last called listen() on the socket.
    static func listenerCredentials(_ path: String) throws -> PeerCredentials? {
        let fd = try EnclaveConnection.connectSocket(path)
        defer { close(fd) }
        return PeerCredentials.of(socket: fd)
    }

    /// The reason a daemon gives when it refuses a connection (sent unasked, right after accept).
    static func refusal(at path: String) -> String? {
        guard let fd = try? EnclaveConnection.connectSocket(path) else { return nil }
        defer { close(fd) }
        var decoder = FrameDecoder()
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(2)
        while Date() < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 200) >= 0 else { return nil }
            guard descriptor.revents != 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return nil }
            decoder.append(buffer[0..<n])
            if let frame = try? decoder.nextFrame(), let envelope = try? ReplyEnvelope.decode(frame) {
                if case .failure(let f) = envelope.reply { return f.message }
                return nil
            }
        }
        return nil
    }
}
