import EnclaveClient
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// What a systemd socket unit does for a test: listening sockets made before the daemon runs,
/// passed as descriptors 3, 4, … with the activation variables.
public enum SocketActivationSupport {
    /// A listening socket at `path` (`mode`), kept above descriptor 100 and close-on-exec until
    /// it is handed to a daemon. Nothing else is set on it: as systemd makes it.
    public static func listeningSocket(at path: String, mode: mode_t) throws -> Int32 {
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8))
            raw[path.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            let e = errno
            close(fd)
            throw XCTSkip("cannot listen on \(path): \(String(cString: strerror(e)))")
        }
        chmod(path, mode)
        let high = fcntl(fd, F_DUPFD_CLOEXEC, 100)
        close(fd)
        return high
    }

    /// Runs `command` with `descriptors` as its descriptors 3, 4, … and the socket-activation
    /// variables (through a shell that execs it, so that LISTEN_PID is the command's own pid),
    /// its output appended to `log`.
    public static func spawn(
        _ command: [String],
        descriptors: [Int32],
        log: String,
        listenPID: String = "$$"
    ) throws -> pid_t {
        precondition(!descriptors.isEmpty, "a socket to pass")
        let argv = ["/bin/sh", "-c", "export LISTEN_PID=\(listenPID); exec \"$@\"", "sh"] + command
        // All named after the unit, as systemd names them: the daemon tells them apart by their paths.
        let names = Array(repeating: "laenclaved.socket", count: descriptors.count)
        let environment = [
            "PATH=/usr/bin:/bin", "LISTEN_FDS=\(descriptors.count)", "LISTEN_FDNAMES=\(names.joined(separator: ":"))",
        ]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log, O_WRONLY | O_APPEND, 0)
        posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO)
        let limit = min(Int32(sysconf(Int32(_SC_OPEN_MAX))), 65536)
        for fd in 3..<max(limit, 3) where !descriptors.contains(fd) && fcntl(fd, F_GETFD) >= 0 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        // dup2 clears close-on-exec on the copies (the descriptors are above 100, the targets not).
        for (index, descriptor) in descriptors.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, descriptor, 3 + Int32(index))
        }
        let argvC: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        let envC: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { for element in (argvC + envC) { free(element) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, argv[0], &actions, nil, argvC, envC)
        guard rc == 0 else {
            throw EnclaveClientError.unreachable("could not start \(command[0]): \(String(cString: strerror(rc)))")
        }
        return pid
    }
}
