import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The socket under a connection: connecting, and whom the daemon may run as.
extension EnclaveConnection {
    /// Who may run the daemon we talk to: ourselves or root; for the system socket also the owner
    /// of its directory (a dedicated daemon user; only root can create it under /run).
    static func trustedDaemonUIDs(socketPath: String) -> Set<UInt32> {
        var trusted: Set<UInt32> = [getuid(), 0]
        if socketPath == EnclavePaths.systemSocket {
            var info = stat()
            if stat((socketPath as NSString).deletingLastPathComponent, &info) == 0 { trusted.insert(info.st_uid) }
        }
        return trusted
    }

    /// A connected Unix stream socket to `path` (close-on-exec); throws `unreachable`.
    public static func connectSocket(_ path: String) throws -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw EnclaveClientError.unreachable("socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw EnclaveClientError.unreachable(String(cString: strerror(errno))) }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let e = errno
            Glibc.close(fd)
            throw EnclaveClientError.unreachable("\(path): \(String(cString: strerror(e)))")
        }
        return fd
    }
}
