import CPeerSocket
import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// systemd socket activation (the protocol of `sd_listen_fds(3)`): systemd binds and listens on
/// `laenclaved.socket`'s path with the owner and mode the unit names, then starts the daemon with
/// that socket as descriptor 3 and `LISTEN_PID` (the daemon's pid), `LISTEN_FDS` (how many
/// descriptors, from 3 on) and optionally `LISTEN_FDNAMES` (their names, `:`-separated) set.
/// The daemon then serves that socket as it is: it never binds, chmods or unlinks the file.
public enum SocketActivation {
    public static let firstDescriptor: Int32 = 3
    /// The name systemd gives the socket of `laenclaved.socket` (its `FileDescriptorName=` default).
    public static let descriptorName = "laenclaved.socket"

    public struct Listener: Sendable, Equatable {
        /// The listening socket, close-on-exec.
        public var descriptor: Int32
        /// The path it is bound to, as the kernel reports it.
        public var path: String
    }

    /// The daemon's socket, and the handoff socket beside it when the unit passes one too
    /// (`ListenStream=…/socket.handoff`, see `Handoff`).
    public struct Listeners: Sendable, Equatable {
        public var main: Listener
        public var handoff: Listener?
    }

    /// The listening Unix stream socket passed to this process, or nil when the process was not
    /// socket-activated (no `LISTEN_*` variables, or they are meant for another pid). The variables
    /// are removed either way, so no child inherits them. Throws when the environment says a socket
    /// was passed but descriptor 3 (or the one named `laenclaved.socket`) is not a listening Unix
    /// stream socket: a daemon that cannot serve the socket systemd holds must not bind another.
    public static func takeListeners() throws -> Listeners? {
        let pid = environmentValue("LISTEN_PID")
        let count = environmentValue("LISTEN_FDS")
        let names = environmentValue("LISTEN_FDNAMES")
        for key in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(key) }
        guard let pid, let count, Int32(pid) == getpid() else { return nil }
        guard let n = Int32(count), n >= 1, n <= 64 else {
            throw DaemonError(.socketActivation, "socket activation: LISTEN_FDS=\(count) names no descriptor")
        }
        let descriptors = Array(firstDescriptor..<(firstDescriptor + n))
        // sd_listen_fds does the same: passed descriptors must not leak into children.
        for fd in descriptors { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let paths = descriptors.map(listeningUnixStreamPath)
        // The daemon's socket: the one named laenclaved.socket, else the first that is not a handoff socket.
        var chosen =
            descriptors.indices.first { paths[$0].map { !$0.hasSuffix(EnclavePaths.handoffSuffix) } ?? true } ?? 0
        if n > 1, let names {
            let list = names.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            if let index = list.indices.first(where: {
                list[$0] == descriptorName && $0 < descriptors.count
                    && !(paths[$0]?.hasSuffix(EnclavePaths.handoffSuffix) ?? false)
            }) {
                chosen = index
            }
        }
        guard let path = paths[chosen] else {
            for fd in descriptors { close(fd) }
            throw DaemonError(
                .socketActivation,
                "socket activation: descriptor \(descriptors[chosen]) is not a listening Unix stream socket bound to a path"
            )
        }
        let handoff = descriptors.indices.first { paths[$0] == EnclavePaths.handoffSocket(for: path) }
        // Extra descriptors are not ours to serve; holding them open would only keep them alive.
        for index in descriptors.indices where index != chosen && index != handoff { close(descriptors[index]) }
        return Listeners(
            main: Listener(descriptor: descriptors[chosen], path: path),
            handoff: handoff.map { Listener(descriptor: descriptors[$0], path: paths[$0]!) }
        )
    }

    private static func environmentValue(_ key: String) -> String? {
        guard let value = getenv(key) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }

    /// The bound path of `fd` if it is a listening AF_UNIX SOCK_STREAM socket.
    static func listeningUnixStreamPath(_ fd: Int32) -> String? {
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK else { return nil }
        func option(_ name: Int32) -> Int32? {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 else { return nil }
            return value
        }
        guard option(SO_DOMAIN) == AF_UNIX, option(SO_TYPE) == Int32(SOCK_STREAM.rawValue), option(SO_ACCEPTCONN) == 1
        else { return nil }
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0 else { return nil }
        let path = withUnsafeBytes(of: address.sun_path) { raw -> String in
            let bytes = raw.prefix(max(0, Int(length) - MemoryLayout<sa_family_t>.size))
            return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        // An abstract or unnamed socket has no file whose permissions guard it.
        return path.hasPrefix("/") ? path : nil
    }
}
