import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The Unix-socket server: accepts, identifies the peer from the kernel, frames, and hands each
/// request to a `ConnectionHandler`. Runs as a swift-service-lifecycle service: SIGTERM/SIGINT
/// stop accepting, end open prompts, and remove the socket.
public struct EnclaveService: Service {
    let daemon: EnclaveDaemon
    let logger: Logger
    /// Connections served at once, per user and in all (`ConnectionBudget`).
    let connections: ConnectionCounter
    /// Where new connections' processes are pinned: off the event loops, in turn per user.
    let pins: PeerPins
    /// Called once the socket accepts connections (tests and the launcher wait for it).
    let onReady: @Sendable () -> Void
    /// Where the handoff socket is handed to its own service, which stops it.
    private let handoff: HandoffSlot

    private struct Listening: Sendable {
        var server: NIOAsyncChannel<AcceptedConnection, Never>
        var path: String
        /// systemd made the socket (path, owner, mode) and keeps it across restarts: it is served
        /// as it is and never unlinked.
        var activated: Bool
    }

    private init(daemon: EnclaveDaemon, logger: Logger, onReady: @escaping @Sendable () -> Void, handoff: HandoffSlot) {
        self.daemon = daemon
        self.logger = logger
        self.onReady = onReady
        self.handoff = handoff
        connections = ConnectionCounter(limits: daemon.config.connectionLimits)
        pins = PeerPins(mode: daemon.config.mode)
    }

    /// The daemon's long-lived parts, as services of one `ServiceGroup`, in the order the group
    /// starts them (and stops them, backwards): the audit log's writer (flushed last, once nothing
    /// can add an entry), the handoff socket, the daemon's socket. The sockets are bound once the
    /// group runs (its signal handlers are in place, so a SIGTERM at any moment stops the daemon
    /// gracefully and removes its socket): the daemon's own first, then the handoff socket beside
    /// it, before the daemon says it is ready — a client that connects then finds both.
    public static func services(
        daemon: EnclaveDaemon,
        logger: Logger,
        onReady: @escaping @Sendable () -> Void = {}
    ) -> [ServiceGroupConfiguration.ServiceConfiguration] {
        let handoff = HandoffSlot()
        return [
            .init(service: AuditLogService(log: daemon.auditLog)), .init(service: HandoffService(slot: handoff)),
            .init(service: EnclaveService(daemon: daemon, logger: logger, onReady: onReady, handoff: handoff)),
        ]
    }

    private func bind(activated: SocketActivation.Listener?) async throws -> Listening {
        if let activated {
            warnIfUntrustedDirectory(of: activated.path)
            let server = try await bootstrap().bind(activated.descriptor) { self.accepted($0) }
            logger.info(
                "listening",
                metadata: [
                    "socket": "\(activated.path)", "activation": "systemd", "mode": "\(daemon.config.mode.rawValue)",
                    "state": "\(daemon.config.stateDirectory)",
                ]
            )
            return Listening(server: server, path: activated.path, activated: true)
        }
        let path = daemon.config.socketPath
        let server = try await bindSocketFile(path)
        logger.info(
            "listening",
            metadata: [
                "socket": "\(path)", "mode": "\(daemon.config.mode.rawValue)",
                "state": "\(daemon.config.stateDirectory)",
            ]
        )
        return Listening(server: server, path: path, activated: false)
    }

    public func run() async throws {
        // /etc/subuid read once before the first connection (and its session) needs it: a share
        // and a session's TPM admission are decided then. On a thread of its own (NSS may wait).
        await LoopThread.run(name: "la-subuid") { SubordinateIDFile.system.readAgain() }
        let listeners = try SocketActivation.takeListeners()
        let listening = try await bind(activated: listeners?.main)
        let server = listening.server
        defer { if !listening.activated { unlink(listening.path) } }
        handoff.hold(startHandoff(passed: listeners?.handoff, socketPath: listening.path))
        onReady()
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { inbound in
                    for try await connection in inbound {
                        let executor = EventLoopTaskExecutor(connection.channel.eventLoop)
                        group.addTask(executorPreference: executor) { await self.serve(connection, on: executor) }
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            daemon.stopping.set()
            server.channel.close(promise: nil)
        }
        logger.info("stopped")
    }

    private func bootstrap() -> ServerBootstrap {
        ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.backlog, value: 128)
            // A client that shuts down its write side after its last request still gets the
            // replies (and the explanation of a truncated frame) before the daemon closes.
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
    }

    /// The child channel's initializer: the peer is admitted and pinned before anything else.
    private func accepted(_ channel: any Channel) -> EventLoopFuture<AcceptedConnection> {
        let connections = self.connections
        return AcceptedConnection.admit(
            channel,
            mode: daemon.config.mode,
            servedUser: daemon.servedUser,
            connections: connections,
            pins: pins,
            helper: daemon.peerHelper
        ).flatMapThrowing { admission in
            do {
                return AcceptedConnection(
                    channel: channel,
                    inbox: try ChannelInbox.install(on: channel),
                    admission: admission
                )
            } catch {
                if let share = admission.countedShare { connections.release(share) }
                // The async bootstrap drops a child whose initializer failed without closing it.
                channel.close(promise: nil)
                throw error
            }
        }
    }

    /// Creates the socket file itself (no socket activation).
    private func bindSocketFile(_ path: String) async throws -> NIOAsyncChannel<AcceptedConnection, Never> {
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Never listen in a directory someone else controls (e.g. a pre-created /tmp/laenclaved-UID).
        var info = stat()
        guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == geteuid() else {
            throw DaemonError(
                .socketDirectory,
                "refusing to listen: \(directory) is not a directory owned by uid \(geteuid())"
            )
        }
        // User mode: only the user may reach the socket. System mode: everyone may connect; the
        // daemon decides per request from the peer's uid.
        chmod(directory, daemon.config.mode == .system ? 0o755 : 0o700)
        // Bound under a temporary name and renamed into place once its mode is final: a client never
        // finds the socket with the umask's 0700 (refused as another user) during start-up.
        var existing = stat()
        if lstat(path, &existing) == 0, (existing.st_mode & S_IFMT) != S_IFSOCK {
            throw DaemonError.socketPathOccupied(path)
        }
        let temporary = path + ".\(getpid()).new"
        let server = try await bootstrap().bind(unixDomainSocketPath: temporary, cleanupExistingSocketFile: true) {
            self.accepted($0)
        }
        guard chmod(temporary, daemon.config.mode == .system ? 0o666 : 0o600) == 0, rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            try? await server.channel.close()
            throw DaemonError.socketPathOccupied(path, errno: code)
        }
        return server
    }

    /// Clients trust a system daemon run by root, by themselves, or by the owner of the socket's
    /// directory: an activated daemon whose directory belongs to someone else will be refused by them.
    private func warnIfUntrustedDirectory(of socketPath: String) {
        let directory = (socketPath as NSString).deletingLastPathComponent
        var info = stat()
        guard geteuid() != 0, stat(directory, &info) == 0, info.st_uid != geteuid() else { return }
        logger.warning(
            "the socket's directory is not owned by the daemon's user: clients will not trust this daemon",
            metadata: ["directory": "\(directory)", "owner": "\(info.st_uid)", "daemon": "\(geteuid())"]
        )
    }

    private func serve(_ accepted: AcceptedConnection, on executor: EventLoopTaskExecutor) async {
        await ConnectionShell.open(accepted.channel) { writer in
            await self.handleRequests(
                of: accepted.channel,
                admission: accepted.admission,
                inbox: accepted.inbox,
                writer: writer,
                executor: executor
            )
        }
    }
}

extension EnclaveService {
    fileprivate func handleRequests(
        of channel: any Channel,
        admission: AcceptedConnection.Admission,
        inbox: ChannelInbox,
        writer: ChannelReplySink,
        executor: EventLoopTaskExecutor
    ) async {
        let credentials: PeerCredentials
        let process: any PinnedPeer
        switch admission {
        case .admitted(let c, let p, _): (credentials, process) = (c, p)
        case .administrator(let c, let share):
            defer { connections.release(share) }
            logger.notice("root connected to administer this user's daemon", metadata: ["pid": "\(c.pid)"])
            let peer = PeerIdentity(uid: c.uid, gid: c.gid, pid: c.pid, identity: .administrator)
            await ConnectionShell(daemon: daemon, logger: logger).serve(
                channel,
                inbox: inbox,
                writer: writer,
                peer: peer,
                process: nil,
                executor: executor
            )
            return
        case .refused(let failure, let log, let pid, let uid):
            logger.notice(
                "\(log)",
                metadata: ["pid": "\(pid)", "uid": "\(uid.map(String.init) ?? "?")", "why": "\(failure.message)"]
            )
            writer.send(ReplyEnvelope(id: 0, reply: .failure(failure)))
            return
        }
        defer { if let share = admission.countedShare { connections.release(share) } }
        let peer = PeerIdentity(
            uid: credentials.uid,
            gid: credentials.gid,
            pid: credentials.pid,
            identity: process.identity,
            session: process.session
        )
        if let claim = (process as? PeerProcess)?.sandbox.flatpak {
            // Why a sandboxed app is (or is not) its app id: the first thing its developer asks.
            logger.info(
                "a client claims to be a Flatpak app",
                metadata: ["pid": "\(credentials.pid)", "verdict": "\(SandboxIdentity.verify(claim))"]
            )
        }
        await ConnectionShell(daemon: daemon, logger: logger).serve(
            channel,
            inbox: inbox,
            writer: writer,
            peer: peer,
            process: process,
            executor: executor
        )
    }
}

/// The daemon's `ConnectionBudget`, shared by its connections' tasks.
final class ConnectionCounter: Sendable {
    private let budget: Mutex<ConnectionBudget>

    init(limits: ConnectionBudget.Limits) { budget = Mutex(ConnectionBudget(limits: limits)) }

    func admit(_ uid: UInt32) -> ConnectionBudget.Refusal? { budget.withLock { $0.admit(uid) } }
    func release(_ uid: UInt32) { budget.withLock { $0.release(uid) } }
}

extension DaemonError {
    /// A socket cannot be put at `path`: something else is there, or the system said `errno`.
    static func socketPathOccupied(_ path: String, errno: Int32? = nil) -> DaemonError {
        guard let errno else {
            return DaemonError(.socketPathOccupied, "refusing to listen: \(path) exists and is not a socket")
        }
        return DaemonError(
            .socketPathOccupied,
            "could not put the socket in place at \(path): \(String(cString: strerror(errno)))"
        )
    }
}
