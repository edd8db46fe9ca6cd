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
        /// Counted in the budget as `share` (`ShareOwner`): released when the connection ends.
        /// Pinned, and proven to hold the connection.
        case admitted(PeerCredentials, any PinnedPeer, share: UInt32)
        /// Root, connected to a user-mode daemon that runs as another user (`AppIdentity.administrator`):
        /// counted in the budget like any peer, not pinned (its process is not the daemon's to read).
        case administrator(PeerCredentials, share: UInt32)
        /// Not counted; the failure is sent, then the connection closes.
        case refused(Failure, log: String, pid: Int32, uid: UInt32?)
    }

    let channel: any Channel
    /// Where the channel's frames arrive (`ChannelInbox.install`).
    let inbox: ChannelInbox
    let admission: Admission

    /// Runs right after the accept, before anything else happens on the connection: the kernel's
    /// facts about the peer and the user-mode and budget checks on the event loop, then the pin
    /// (`PeerProcess`) on `pins`, off the loop and in turn per user — so that the executable is read
    /// before the client is heard, and a refused connection costs no more than its socket.
    /// With `helper`, the pin is the privileged helper's (`PeerHelper`): this process then holds no
    /// capability to read other users' processes.
    static func admit(
        _ channel: any Channel,
        mode: DaemonMode,
        servedUser: UInt32,
        connections: ConnectionCounter,
        pins: PeerPins,
        helper: PeerHelperClient? = nil
    ) -> EventLoopFuture<Admission> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(.unidentified(nil, pid: 0, uid: nil))
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
        return pidfd.flatMap { pidfd in
            credentials.and(cookie).flatMapError { error in
                if let pidfd { close(pidfd) }
                return channel.eventLoop.makeFailedFuture(error)
            }.flatMap { credentials, cookie in
                checkThenPin(credentials, cookie: cookie, pidfd: pidfd)
            }
        }.recover { error in .unidentified(error, pid: 0, uid: nil) }

        /// The kernel's facts in hand: the user-mode and budget checks, then the pin. Owns `pidfd`.
        @Sendable func checkThenPin(
            _ credentials: PeerCredentials,
            cookie: UInt64,
            pidfd: Int32?
        ) -> EventLoopFuture<Admission> {
            let visiting = mode == .user && credentials.uid != servedUser
            let share = PeerProcess.share(uid: credentials.uid, pid: credentials.pid)
            let refusal: Admission? =
                if visiting && credentials.uid != 0 {
                    .refused(
                        Failure(.notPermitted, "this user-mode daemon serves uid \(servedUser) only"),
                        log: "refused a connection from another user",
                        pid: credentials.pid,
                        uid: credentials.uid
                    )
                } else if let refusal = connections.admit(share) {
                    .refused(
                        refusal.failure,
                        log: "refused a connection over the limit",
                        pid: credentials.pid,
                        uid: credentials.uid
                    )
                } else if visiting {
                    .administrator(credentials, share: share)
                } else {
                    nil
                }
            if let refusal {
                if let pidfd { close(pidfd) }
                return channel.eventLoop.makeSucceededFuture(refusal)
            }
            // The executable is read first; then the process must hold this connection, close-on-exec
            // (a process that exec'd in between has lost it).
            return pins.pin(uid: share, on: channel.eventLoop) { () throws(PeerProcess.Refusal) in
                defer { if let pidfd { close(pidfd) } }
                if let helper { return try helper.pin(pid: credentials.pid, pidfd: pidfd, cookie: cookie) }
                let process = try PeerProcess(pid: credentials.pid, pidfd: pidfd)
                try process.confirmHolds(connectionCookie: cookie)
                return process
            }.map { outcome in
                switch outcome {
                case .success(let peer): return .admitted(credentials, peer, share: share)
                case .failure(let error):
                    connections.release(share)
                    return .unidentified(error, pid: credentials.pid, uid: credentials.uid)
                }
            }
        }
    }
}

extension AcceptedConnection.Admission {
    /// Refused: the daemon could not tell who the client is (`why`, when known).
    static func unidentified(_ why: (any Error)?, pid: Int32, uid: UInt32?) -> Self {
        .refused(
            Failure(.notPermitted, "the daemon could not identify this client" + (why.map { ": \($0)" } ?? "")),
            log: "refused a client the daemon could not identify",
            pid: pid,
            uid: uid
        )
    }

    /// The share counted in the connection budget, to release when the connection ends.
    var countedShare: UInt32? {
        switch self {
        case .admitted(_, _, let share), .administrator(_, let share): share
        case .refused: nil
        }
    }
}
