import EnclaveCore
import Foundation

/// Who is on the other end of a connection, from the kernel (SO_PEERCRED, SO_PEERPIDFD, /proc and
/// sock_diag, pinned by `PeerProcess`) — never from anything the client says.
public struct PeerIdentity: Sendable, Equatable {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32
    /// The app: a verified executable path, an interpreter's, or an unverified executable's.
    public var identity: AppIdentity

    /// Its logind session, read when the connection was accepted (nil: outside any session).
    public var session: String?

    /// The identity's name, as items, keys, domain state and audit entries store it.
    public var app: String { identity.name }

    /// Where its prompts are drawn: its user and session.
    public var seat: PromptSeat { PromptSeat(uid: uid, session: session) }

    public init(uid: UInt32, gid: UInt32, pid: Int32, identity: AppIdentity, session: String? = nil) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.identity = identity
        self.session = session
    }
}
