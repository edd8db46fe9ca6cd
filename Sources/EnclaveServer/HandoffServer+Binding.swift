import CPeerSocket

#if canImport(Glibc)
import Glibc
#endif

extension HandoffServer {
    /// Whether the kernel refuses descriptors sent on `listener`'s connections before they are
    /// asked for (SO_PASSRIGHTS, Linux 6.16), which it is told to do here. False before 6.16.
    static func refusesUnaskedDescriptors(_ listener: Int32) -> Bool { la_take_descriptors(listener, 0) == 0 }

    /// Binds `path` (0666 in system mode, 0600 in user mode, like the daemon's socket), replacing a
    /// stale socket file; throws when something else is there.
    static func bind(path: String, mode: mode_t) throws -> Int32 {
        var existing = stat()
        if lstat(path, &existing) == 0 {
            guard (existing.st_mode & S_IFMT) == S_IFSOCK else { throw DaemonError.socketPathOccupied(path) }
            unlink(path)
        }
        let fd = socket(
            AF_UNIX,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue),
            0
        )
        guard fd >= 0 else { throw DaemonError.socketPathOccupied(path, errno: errno) }
        // Refusing descriptors before it listens: a connection takes the listener's setting when
        // it is made (`start` sets it again on a listener systemd passed).
        _ = refusesUnaskedDescriptors(fd)
        // Bound under a temporary name and renamed once its mode is final, as the daemon's socket
        // (the longer name: `path` fits when it does).
        let temporary = path + ".\(getpid()).new"
        guard var temporaryAddress = Self.address(temporary) else {
            close(fd)
            throw DaemonError.socketPathOccupied(path, errno: ENAMETOOLONG)
        }
        unlink(temporary)
        let bound = withUnsafePointer(to: &temporaryAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, chmod(temporary, mode) == 0, listen(fd, 64) == 0, rename(temporary, path) == 0 else {
            let e = errno
            unlink(temporary)
            close(fd)
            throw DaemonError.socketPathOccupied(path, errno: e)
        }
        return fd
    }

    /// `path` as a Unix socket's address; nil when it is too long for one.
    private static func address(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }
}
