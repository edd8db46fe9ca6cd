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

    /// The identity's name, as items, keys, domain state and audit entries store it.
    public var app: String { identity.name }

    public init(uid: UInt32, gid: UInt32, pid: Int32, identity: AppIdentity) {
        self.uid = uid; self.gid = gid; self.pid = pid; self.identity = identity
    }
}
