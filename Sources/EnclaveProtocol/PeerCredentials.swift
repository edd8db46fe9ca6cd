#if canImport(Glibc)
import Glibc
#endif

/// Linux's `struct ucred` (pid, uid, gid) as the kernel reports the other end of a Unix socket
/// (SO_PEERCRED). Glibc's module map does not export `ucred` without _GNU_SOURCE; same layout.
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32 = 0
    public var uid: UInt32 = 0
    public var gid: UInt32 = 0
    public init() {}

    /// The credentials of the process at the other end of the connected socket `fd`.
    public static func of(socket fd: Int32) -> PeerCredentials? {
        var cred = PeerCredentials()
        var length = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0, length == MemoryLayout<PeerCredentials>.size
        else { return nil }
        return cred
    }
}
