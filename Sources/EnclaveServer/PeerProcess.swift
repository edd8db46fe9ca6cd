import CPeerSocket
import EnclaveCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The process at the other end of one connection, pinned when the connection is accepted and
/// held to it for the connection's life.
///
/// The kernel's SO_PEERCRED names the process that connected, by pid. Three ways to borrow another
/// app's identity from there, and what stops each:
/// - **pid reuse:** `/proc/PID` is opened once, as a directory handle that names that process only
///   (after it ends, the handle finds nothing, whoever gets the pid next); with SO_PEERPIDFD the
///   handle is confirmed to be the connecting process's, which was still running after it opened.
/// - **connect, then exec the victim** (keeping the socket in a child): the executable is read at
///   once, and then the process must be holding this very connection (sock_diag names the socket at
///   its end), close-on-exec. A process that exec'd the victim before that point has lost the
///   connection on exec, or holds it inheritable: refused. One that exec's later is caught by
///   `executableChanged()`, which the server asks before every request.
/// - **a namespace of its own:** `AppIdentity.resolve`, from the file the process runs, or from a
///   sandbox that verifies (`SandboxEvidenceReader`, `SandboxIdentity`).
/// What stays possible for code running as the same user: injecting into the real executable
/// (`LD_PRELOAD`, ptrace where `kernel.yama.ptrace_scope` allows it); see docs/architecture.md.
final class PeerProcess: Sendable {
    enum Refusal: Error, Equatable, CustomStringConvertible {
        case ended
        case unreadable(Int32)
        case notHoldingConnection
        case inheritableConnection
        case socketUnknown(Int32)
        case tooManyDescriptors

        var description: String {
            switch self {
            case .ended: return "the process that connected has ended"
            case .unreadable(let e):
                return "the daemon cannot read the client process (\(String(cString: strerror(e))))"
            case .notHoldingConnection:
                return "the process that connected no longer holds the connection (it closed it, or exec'd)"
            case .inheritableConnection:
                return "the connection must be close-on-exec in the process that opened it (SOCK_CLOEXEC)"
            case .socketUnknown(let e):
                return "the kernel could not name the client's socket (sock_diag: \(String(cString: strerror(e))))"
            case .tooManyDescriptors:
                return
                    "the client process holds more descriptors than the daemon searches (\(PeerProcess.descriptorsSearched), or a quarter of a second)"
            }
        }
    }

    let pid: Int32
    /// The executable's path as the client's own mount namespace names it.
    let executablePath: String
    /// The file the process ran when it was pinned.
    let executable: AppIdentity.FileID
    /// Its logind session when it was pinned (`LoginSession`): which prompt agent draws its
    /// prompts. Read by pid before `confirmHolds`, which then finds the pinned process alive.
    let session: String?
    /// What it offered for being a sandboxed app when it was pinned.
    let sandbox: AppIdentity.SandboxEvidence
    /// Whether the kernel confirmed (SO_PEERPIDFD) that the process pinned is the one that connected.
    let confirmedByPidfd: Bool
    /// `/proc/PID`, opened while the connecting process ran: it names that process and no other.
    private let directory: Int32

    /// Pins `pid`. `pidfd` (SO_PEERPIDFD; nil where the kernel lacks it) confirms that the
    /// directory opened is the connecting process's; the caller keeps and closes it.
    init(pid: Int32, pidfd: Int32?) throws(Refusal) {
        self.pid = pid
        let directory = open("/proc/\(pid)", la_o_path | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw errno == ENOENT ? .ended : .unreadable(errno) }
        if let pidfd {
            var ready = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            // Readable: the process has exited, and the pid may since name another.
            guard poll(&ready, 1, 0) == 0 else {
                Glibc.close(directory)
                throw .ended
            }
        }
        guard let file = Self.executableFile(directory), let path = Self.executablePath(directory) else {
            let code = errno
            Glibc.close(directory)
            throw code == ENOENT || code == ESRCH ? .ended : .unreadable(code)
        }
        self.directory = directory
        self.executable = file
        self.executablePath = path
        self.session = LoginSession.of(process: directory)
        self.sandbox = SandboxEvidenceReader.read(process: directory)
        self.confirmedByPidfd = pidfd != nil
    }

    deinit { Glibc.close(directory) }

    /// How many of a client's descriptors the daemon searches for the connection at most.
    static let descriptorsSearched = 65_536

    /// The app this process is, judged in the daemon's own view of the file system.
    var identity: AppIdentity {
        // A path of the client's choosing, walked in the daemon's view: nothing on it is asked to
        // refresh what it told the kernel, and no automount point is mounted (`fileID`).
        let atPath = executablePath.hasPrefix("/") ? Self.fileID(AT_FDCWD, executablePath) : nil
        return AppIdentity.resolve(path: executablePath, running: executable, atPath: atPath, sandbox: sandbox)
    }

    /// Whether the process no longer runs the executable it was pinned with (it exec'd another, or
    /// ended). One `fstatat` on the pinned directory.
    func executableChanged() -> Bool {
        Self.executableFile(directory) != executable
    }

    /// Checks that the pinned process holds the client end of the connection whose daemon end has
    /// the socket cookie `cookie`, in every descriptor it has for it, close-on-exec. Called after
    /// the executable was read: an exec in between closes the descriptor (or left it inheritable).
    func confirmHolds(connectionCookie cookie: UInt64) throws(Refusal) {
        try confirmHolds(connectionCookie: cookie, searchingAtMost: Self.descriptorsSearched)
    }

    func confirmHolds(connectionCookie cookie: UInt64, searchingAtMost limit: Int) throws(Refusal) {
        // Both ends of an AF_UNIX connection live in the connecting socket's network namespace, and
        // sock_diag shows the daemon its own only. A Flatpak app without network access is in a
        // namespace of its own, so its connection cannot be found — and need not be: a verified
        // sandboxed app is named by its sandbox, which an exec inside it does not leave, not by the
        // program it runs; and SO_PEERPIDFD proved that the process pinned is the one that
        // connected (without it, a pid reused by such an app could be taken for the connection's).
        // Every other client in another network namespace is refused below.
        if sandbox.verified != nil, confirmedByPidfd, let theirs = Self.fileID(directory, "ns/net"),
            let ours = Self.fileID(AT_FDCWD, "/proc/self/ns/net"), theirs != ours
        {
            return
        }
        let found = la_unix_peer_inode(cookie)
        guard found >= 0 else { throw .socketUnknown(Int32(-found)) }
        guard found > 0 else { throw .notHoldingConnection }
        let target = "socket:[\(found)]"
        let fds = openat(directory, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fds >= 0 else { throw errno == ENOENT || errno == ESRCH ? .ended : .unreadable(errno) }
        guard let listing = fdopendir(fds) else {
            Glibc.close(fds)
            throw .unreadable(errno)
        }
        defer { closedir(listing) }
        var holding: [String] = []
        var link = [CChar](repeating: 0, count: 64)
        var searched = 0
        let started = DispatchTime.now().uptimeNanoseconds
        while let entry = readdir(listing) {
            let name = Self.entryName(entry)
            guard name.first?.isNumber == true else { continue }
            // Bounded: a client cannot hold the pin (and, in system mode, the helper) for long.
            searched += 1
            guard searched <= limit else { throw .tooManyDescriptors }
            // And in time: a quarter of a second of searching at most, whatever the entries cost.
            if searched % 1024 == 0, DispatchTime.now().uptimeNanoseconds - started > 250_000_000 {
                throw .tooManyDescriptors
            }
            let n = readlinkat(fds, name, &link, link.count - 1)
            guard n > 0 else { continue }
            link[n] = 0
            if String(cString: link) == target { holding.append(name) }
        }
        guard !holding.isEmpty else { throw Self.executableFile(directory) == nil ? .ended : .notHoldingConnection }
        for fd in holding {
            guard let flags = Self.descriptorFlags(directory, fd) else { throw .notHoldingConnection }
            guard flags & Int(O_CLOEXEC) != 0 else { throw .inheritableConnection }
        }
    }

    private static func executableFile(_ directory: Int32) -> AppIdentity.FileID? { fileID(directory, "exe") }

    private static func executablePath(_ directory: Int32) -> String? { link(directory, "exe") }

    /// The file `path` (under `directory`) names, symbolic links followed — as the kernel has it
    /// cached: a client's executable may lie on FUSE, or on overlayfs over FUSE, whose server could
    /// otherwise make this wait for as long as it likes (in system mode, the helper, for everyone).
    static func fileID(_ directory: Int32, _ path: String) -> AppIdentity.FileID? {
        var device: UInt64 = 0
        var inode: UInt64 = 0
        guard la_file_id(directory, path, &device, &inode) == 0 else { return nil }
        return AppIdentity.FileID(device: device, inode: inode)
    }

    /// The name of an entry `readdir` returned, read in place up to its NUL. A record is only as
    /// long as its name: copying the whole 256-byte `d_name` (or the whole `dirent`) reads past
    /// the last record of the directory's buffer, and crashed the peer helper when that buffer
    /// ended a mapping (a user holding 20,000 descriptors, `PeerHelperTests`' flood).
    static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
        let name = UnsafeRawPointer(entry).advanced(by: MemoryLayout<dirent>.offset(of: \.d_name)!)
            .assumingMemoryBound(to: CChar.self)
        return String(decoding: UnsafeRawBufferPointer(start: name, count: strlen(name)), as: UTF8.self)
    }

    /// What the symbolic link `path` (under `directory`) holds.
    static func link(_ directory: Int32, _ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlinkat(directory, path, &buffer, Int(PATH_MAX))
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n], as: UTF8.self)
    }

    /// The open flags of descriptor `fd` of the process (`flags:` in `/proc/PID/fdinfo/FD`, octal).
    private static func descriptorFlags(_ directory: Int32, _ fd: String) -> Int? {
        guard let info = procFile(directory, "fdinfo/\(fd)") else { return nil }
        for line in String(decoding: info, as: UTF8.self).split(separator: "\n") where line.hasPrefix("flags:") {
            return Int(line.dropFirst("flags:".count).trimmingCharacters(in: .whitespaces), radix: 8)
        }
        return nil
    }

    /// A file the kernel writes (`/proc`, `/sys`): no file system of anyone's behind it. Opened
    /// non-blocking: a process may hold a lease on its own `/proc` files, which would make any
    /// blocking open wait for the lease break time (45 s).
    static func procFile(_ directory: Int32, _ path: String) -> [UInt8]? {
        let file = openat(directory, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { Glibc.close(file) }
        return bounded(file, atMost: 64 * 1024)
    }

    /// `/proc/PID/FILE` as text (non-blocking, bounded: `procFile`), for a process named by its pid
    /// (no pinned directory); nil if unreadable. `proc`: another /proc, for tests.
    static func procText(_ pid: Int32, _ file: String, proc: String = "/proc") -> String? {
        procFile(AT_FDCWD, "\(proc)/\(pid)/\(file)").map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whose share of the daemon (`ShareOwner`) the process's connections and work take: a
    /// subordinate uid's account (`SubordinateIDFile`), root's by its `/proc/PID/loginuid`. Read by
    /// pid: a process that ended and whose pid was taken meanwhile counts against another share,
    /// which decides nothing about what the connection may do.
    static func share(
        uid: UInt32,
        pid: Int32,
        subordinates: SubordinateIDs = SubordinateIDFile.system.current
    ) -> UInt32 {
        let loginUID = uid == 0 ? procText(pid, "loginuid").flatMap { UInt32($0) } : nil
        return ShareOwner.of(uid: uid, loginUID: loginUID, subordinates: subordinates)
    }

    /// All of an open file, if it has at most `limit` bytes.
    static func bounded(_ file: Int32, atMost limit: Int) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = Glibc.read(file, &chunk, chunk.count)
            guard n >= 0 else { return nil }
            if n == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<n])
            guard bytes.count <= limit else { return nil }
        }
    }
}

extension LoginSession {
    /// The logind session of the process whose `/proc/PID` is `directory`.
    static func of(process directory: Int32) -> String? {
        PeerProcess.procFile(directory, "cgroup").flatMap { name(cgroup: String(decoding: $0, as: UTF8.self)) }
    }
}
