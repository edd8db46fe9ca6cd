import CPeerSocket
import EnclaveCore
import EnclaveProtocol
import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// A connection as the accept step hands it over: the channel, and whether its peer was admitted
/// (then counted in the connection budget and pinned) or refused (with the reason to send).
struct AcceptedConnection: Sendable {
    enum Admission: Sendable {
        /// Counted in the budget: release `credentials.uid` when the connection ends.
        case admitted(PeerCredentials, any PinnedPeer, connectionCookie: UInt64)
        /// Root, connected to a user-mode daemon that runs as another user (`AppIdentity.administrator`):
        /// counted in the budget like any peer, not pinned (its process is not the daemon's to read).
        case administrator(PeerCredentials)
        /// Not counted; the failure is sent, then the connection closes.
        case refused(Failure, log: String, pid: Int32, uid: UInt32?)
    }

    let channel: any Channel
    /// Where the channel's frames arrive (`ChannelInbox.install`).
    let inbox: ChannelInbox
    let admission: Admission

    /// Runs on the event loop right after the accept, before anything else happens on the
    /// connection: the kernel's facts about the peer, the user-mode and budget checks, then the pin
    /// (`PeerProcess`) — so that the executable read is as near the connect as the kernel lets
    /// anyone get, and a refused connection costs no more than its socket.
    /// With `helper`, the pin is the privileged helper's (`PeerHelper`): this process then holds no
    /// capability to read other users' processes.
    static func admit(
        _ channel: any Channel,
        mode: DaemonMode,
        servedUser: UInt32,
        connections: ConnectionCounter,
        helper: PeerHelperClient? = nil
    ) -> EventLoopFuture<Admission> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(
                .refused(
                    Failure(.notPermitted, "the daemon could not identify this client"),
                    log: "refused a client the daemon could not identify",
                    pid: 0,
                    uid: nil
                )
            )
        }
        let level = SocketOptionLevel(SOL_SOCKET)
        let credentials: EventLoopFuture<PeerCredentials> = provider.unsafeGetSocketOption(
            level: level,
            name: SocketOptionName(SO_PEERCRED)
        )
        // Absent before Linux 6.5: the pin then goes without it (`PeerProcess`).
        let pidfd: EventLoopFuture<Int32?> = provider.unsafeGetSocketOption(
            level: level,
            name: SocketOptionName(la_so_peerpidfd)
        )
        .map { Optional($0) }.recover { _ in nil }
        let cookie: EventLoopFuture<UInt64> = provider.unsafeGetSocketOption(
            level: level,
            name: SocketOptionName(la_so_cookie)
        )
        return credentials.and(pidfd).and(cookie).map { pair, cookie in
            let (credentials, pidfd) = pair
            defer { if let pidfd { close(pidfd) } }
            let visiting = mode == .user && credentials.uid != servedUser
            if visiting && credentials.uid != 0 {
                return .refused(
                    Failure(.notPermitted, "this user-mode daemon serves uid \(servedUser) only"),
                    log: "refused a connection from another user",
                    pid: credentials.pid,
                    uid: credentials.uid
                )
            }
            if let refusal = connections.admit(credentials.uid) {
                return .refused(
                    refusal.failure,
                    log: "refused a connection over the limit",
                    pid: credentials.pid,
                    uid: credentials.uid
                )
            }
            if visiting { return .administrator(credentials) }
            do throws(PeerProcess.Refusal) {
                if let helper {
                    return .admitted(
                        credentials,
                        try helper.pin(pid: credentials.pid, pidfd: pidfd, cookie: cookie),
                        connectionCookie: cookie
                    )
                }
                return .admitted(
                    credentials,
                    try PeerProcess(pid: credentials.pid, pidfd: pidfd),
                    connectionCookie: cookie
                )
            } catch {
                connections.release(credentials.uid)
                return .refused(
                    Failure(.notPermitted, "the daemon could not identify this client: \(error)"),
                    log: "refused a client the daemon could not identify",
                    pid: credentials.pid,
                    uid: credentials.uid
                )
            }
        }.recover { error in
            .refused(
                Failure(.notPermitted, "the daemon could not identify this client: \(error)"),
                log: "refused a client the daemon could not identify",
                pid: 0,
                uid: nil
            )
        }
    }
}

extension AcceptedConnection.Admission {
    /// The uid counted in the connection budget, to release when the connection ends.
    var countedUser: UInt32? {
        switch self {
        case .admitted(let credentials, _, _), .administrator(let credentials): credentials.uid
        case .refused: nil
        }
    }
}
