import BlockingPool
import CPeerSocket
import EnclaveCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon keeps of a connection's peer process once it is pinned: who it is, its session,
/// and whether it has since run another executable.
protocol PinnedPeer: AnyObject, Sendable {
    var identity: AppIdentity { get }
    var session: String? { get }
    /// Whether the process no longer runs the executable it was pinned with (checked before every request).
    func executableChanged() -> Bool
}

extension PeerProcess: PinnedPeer {}

/// The least-privilege split of a system daemon (issue 10, item 7): reading another user's
/// `/proc/PID/exe` and `/proc/PID/fd` needs CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH, and a process
/// holding CAP_SYS_PTRACE can write into any process's memory — root's included. So the daemon that
/// parses clients' requests (JSON, SQLite, D-Bus, PAM) gives both up, and this helper, a child
/// started before, keeps them and does only that: it pins a peer (`PeerProcess`: the executable,
/// the session, the proof that it holds the connection), answers whether a pinned peer still runs
/// the same executable, and forgets it; and it names the holders of a pseudo-terminal's master
/// (`PtyMasterHolders`), which administration on a terminal asks (issue 33). It takes messages from
/// the daemon alone (its end of a socket pair); what it reads of a client is what the kernel shows
/// of its process.
///
/// Messages (native byte order; one per SOCK_SEQPACKET datagram):
/// - request, 32 bytes: operation (UInt32: 1 pin, 2 check, 3 release, 4 holders), pid (Int32; for
///   holders, 0: every process, else that process alone), handle (UInt64; for holders, the
///   pseudo-terminal's index), connection cookie (UInt64),
///   sequence (UInt64); a pin may carry the peer's pidfd (SCM_RIGHTS).
/// - answer to pin and check (release has none): status (Int32: `Status`), errno (Int32), handle
///   (UInt64), the request's sequence (UInt64), identity kind (UInt8), name length (UInt16),
///   session length (UInt16, 0xFFFF: none), then the name's and the session's bytes. Answers come as their requests end, not in their order (`serve`): the daemon matches
///   each to its request by sequence, and drops one whose request gave up (a late pin released).
/// - answer to holders: the same header with handle 0 (never taken for a pinned peer), identity kind
///   0, the records' length in the name's place and no session, then one record per holder: pid
///   (Int32), whether its executable's file was read (UInt8), device and inode (UInt64 each), the
///   executable's path length (UInt8; 0 when unread or longer than 255 bytes) and the path; status
///   `tooLong` when the records do not fit, `outOfTime` when the scan took longer than its budget
///   (the daemon then refuses the terminal).
public enum PeerHelper {
    enum Operation: UInt32 {
        case pin = 1
        case check = 2
        case release = 3
        case holders = 4
    }
    /// An answer's status: the helper's whole vocabulary, said here once.
    enum Status: Int32 {
        /// Pinned; unchanged (a check); scanned.
        case ok = 0
        /// The process ended; or, to a check, it runs another executable (or is unknown).
        case ended = 1
        case unreadable = 2
        case notHoldingConnection = 3
        case inheritableConnection = 4
        case socketUnknown = 5
        case badRequest = 6
        /// A name, session or the holders' records longer than one answer holds.
        case tooLong = 7
        case tooManyDescriptors = 8
        /// A holders scan past its budget.
        case outOfTime = 9
        /// `workers` pins and scans under way already (errno EAGAIN).
        case busy = 10

        static let changed = Status.ended
    }

    /// The status an answer carries, nil when it is none the helper says.
    static func status(of answer: [UInt8]) -> Status? { Status(rawValue: read(answer, 0, Int32.self)) }

    static let requestSize = 32
    static let headerSize = 4 + 4 + 8 + 8 + 1 + 2 + 2
    /// A name is a path as `String(cString:)` made it (each byte at most 3 in UTF-8), or an
    /// unverified identity that also names the file.
    static let maxName = 3 * Int(PATH_MAX) + 64
    static let maxSession = 255
    static let maxAnswer = headerSize + maxName + maxSession
    /// An identity's kind travels as its index here (both ends are the same program).
    static let kinds = AppIdentity.Kind.allCases

    /// Pins and holders scans that may run at once; past it a request is answered "busy" (status
    /// 10). The daemon asks at most `PeerPins.threads` pins, one full scan and a few one-process
    /// scans (`BlockingWork.waitingThreads`) at a time; pins it gave up on may still run here.
    static let workers = 16

    /// The helper's loop, on `socket` (its end of the pair). Ends the process when the daemon's end
    /// closes. Checks are answered and releases done here, in the order they come: each is one
    /// look-up and one `statx` that asks no file system (`AT_STATX_DONT_SYNC`: a FUSE server
    /// cannot hold this loop), and never waits behind a pin. Pins and holders scans (a process's
    /// descriptors searched, up to a quarter of a second) run on a pool of `workers` threads side
    /// by side, each answered when it ends, so a user who makes their own pin slow holds no one
    /// else's.
    public static func serve(socket: Int32) -> Never {
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
        let pinned = PinnedProcesses()
        let pool = BlockingPool(threads: workers, name: "la-helper-")
        let working = Atomic(0)
        var buffer = [UInt8](repeating: 0, count: 64)
        var fds = [Int32](repeating: -1, count: 1)
        while true {
            var ready = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, -1) >= 0 || errno == EINTR else { exit(1) }
            var count: Int32 = 0
            fds[0] = -1
            let n = la_receive_with_descriptors(socket, &buffer, buffer.count, &fds, 1, &count)
            if n < 0 { if errno == EAGAIN || errno == EINTR { continue } else { exit(1) } }
            if n == 0 { exit(0) }
            // Only a descriptor this message brought (a truncated one reports more than it brought).
            let pidfd: Int32? = fds[0] >= 0 ? fds[0] : nil
            let sequence = n >= requestSize ? read(buffer, 24, UInt64.self) : 0
            guard n == requestSize, count <= 1, let operation = Operation(rawValue: read(buffer, 0, UInt32.self)) else {
                if let pidfd { close(pidfd) }
                answer(socket, sequence: sequence, status: .badRequest)
                continue
            }
            let pid = read(buffer, 4, Int32.self)
            let handle = read(buffer, 8, UInt64.self)
            let cookie = read(buffer, 16, UInt64.self)
            switch operation {
            case .check:
                if let pidfd { close(pidfd) }
                answer(socket, sequence: sequence, status: pinned.executableChanged(handle) ? .changed : .ok)
            case .release:
                if let pidfd { close(pidfd) }
                pinned.forget(handle)
            case .pin, .holders:
                guard working.add(1, ordering: .relaxed).newValue <= workers else {
                    working.subtract(1, ordering: .relaxed)
                    if let pidfd { close(pidfd) }
                    answer(socket, sequence: sequence, status: .busy, errno: EAGAIN)
                    continue
                }
                pool.submit { _ in
                    let answer =
                        operation == .pin
                        ? pin(pid: pid, pidfd: pidfd, cookie: cookie, sequence: sequence, into: pinned)
                        : holders(index: handle, only: pid, sequence: sequence)
                    if let pidfd { close(pidfd) }
                    // Counted out before the answer goes: the daemon's next request finds the room.
                    working.subtract(1, ordering: .relaxed)
                    send(answer, on: socket)
                }
            }
        }
    }

    static func code(of refusal: PeerProcess.Refusal) -> (Status, Int32) {
        switch refusal {
        case .ended: return (.ended, 0)
        case .unreadable(let e): return (.unreadable, e)
        case .notHoldingConnection: return (.notHoldingConnection, 0)
        case .inheritableConnection: return (.inheritableConnection, 0)
        case .socketUnknown(let e): return (.socketUnknown, e)
        case .tooManyDescriptors: return (.tooManyDescriptors, 0)
        }
    }

    static func refusal(status: Status?, errno code: Int32) -> PeerProcess.Refusal {
        switch status {
        case .ended: return .ended
        case .notHoldingConnection: return .notHoldingConnection
        case .inheritableConnection: return .inheritableConnection
        case .socketUnknown: return .socketUnknown(code)
        case .tooLong: return .unreadable(ENAMETOOLONG)
        case .tooManyDescriptors: return .tooManyDescriptors
        default: return .unreadable(code == 0 ? EPROTO : code)
        }
    }

    static func answer(
        _ socket: Int32,
        sequence: UInt64,
        status: Status,
        errno code: Int32 = 0
    ) {
        send(answer(sequence: sequence, status: status, errno: code), on: socket)
    }

    static func send(_ answer: [UInt8], on socket: Int32) {
        _ = answer.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// An answer's bytes. `payload`: a holders answer's records, in the name's place.
    static func answer(
        sequence: UInt64,
        status: Status,
        errno code: Int32 = 0,
        handle: UInt64 = 0,
        identity: AppIdentity? = nil,
        session: String? = nil,
        payload: [UInt8]? = nil
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        append(&bytes, status.rawValue)
        append(&bytes, code)
        append(&bytes, handle)
        append(&bytes, sequence)
        let name = payload ?? Array((identity?.name ?? "").utf8)
        let place = Array((session ?? "").utf8)
        bytes.append(UInt8(identity.flatMap { kinds.firstIndex(of: $0.kind) } ?? 0))
        append(&bytes, UInt16(name.count))
        append(&bytes, session == nil ? UInt16.max : UInt16(place.count))
        bytes += name + place
        return bytes
    }

    static let recordHeader = 4 + 1 + 8 + 8 + 1
    /// The room an answer has for records (the name's).
    static let maxRecords = maxName

    /// A holders answer's records, nil when they do not fit one answer.
    static func records(of holders: [TerminalHolders.Holder]) -> [UInt8]? {
        var bytes: [UInt8] = []
        for holder in holders {
            let path = holder.executable.map { Array($0.utf8) }.flatMap { $0.count <= Int(UInt8.max) ? $0 : nil } ?? []
            append(&bytes, holder.pid)
            bytes.append(holder.file == nil ? 0 : 1)
            append(&bytes, holder.file?.device ?? 0)
            append(&bytes, holder.file?.inode ?? 0)
            bytes.append(UInt8(path.count))
            bytes += path
        }
        return bytes.count <= maxRecords ? bytes : nil
    }

    /// The holders in `records`, nil when they are malformed.
    static func holders(from records: ArraySlice<UInt8>) -> [TerminalHolders.Holder]? {
        let bytes = Array(records)
        var holders: [TerminalHolders.Holder] = []
        var at = 0
        while at < bytes.count {
            guard bytes.count - at >= recordHeader else { return nil }
            let pid = read(bytes, at, Int32.self)
            let known = bytes[at + 4]
            let file = AppIdentity.FileID(
                device: read(bytes, at + 5, UInt64.self),
                inode: read(bytes, at + 13, UInt64.self)
            )
            let length = Int(bytes[at + 21])
            at += recordHeader
            guard known <= 1, bytes.count - at >= length else { return nil }
            let path = length == 0 ? nil : String(decoding: bytes[at..<(at + length)], as: UTF8.self)
            holders.append(.init(pid: pid, executable: path, file: known == 1 ? file : nil))
            at += length
        }
        return holders
    }

    /// A request's bytes, as the daemon sends it.
    static func request(
        _ operation: Operation,
        pid: Int32 = 0,
        handle: UInt64 = 0,
        cookie: UInt64 = 0,
        sequence: UInt64
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        append(&bytes, operation.rawValue)
        append(&bytes, pid)
        append(&bytes, handle)
        append(&bytes, cookie)
        append(&bytes, sequence)
        return bytes
    }

    static func append<T: FixedWidthInteger>(_ bytes: inout [UInt8], _ value: T) {
        withUnsafeBytes(of: value) { bytes += $0 }
    }

    static func read<T: FixedWidthInteger>(_ bytes: [UInt8], _ offset: Int, _ type: T.Type) -> T {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
    }

    /// Starts the helper (keeping the capabilities this process was given) and then this program
    /// again in this process without any (`--peer-helper-socket`, right after the program name):
    /// the ambient set cleared, and no new privileges from any program it may run. Returns only if
    /// that could not be done.
    public static func launchThenDropCapabilities(arguments: [String]) throws {
        var pair: [Int32] = [-1, -1]
        guard la_socketpair_seqpacket(&pair) == 0 else {
            throw DaemonError(.peerHelper, "socketpair: \(String(cString: strerror(errno)))")
        }
        // The helper's end is inherited by it alone; the daemon's end by the next program image.
        _ = fcntl(pair[1], F_SETFD, 0)
        let helper = try spawn(["laenclaved", "--peer-helper", String(pair[1])], keeping: pair[1])
        close(pair[1])
        _ = fcntl(pair[0], F_SETFD, 0)
        guard la_clear_ambient_capabilities() == 0, la_set_no_new_privileges() == 0 else {
            kill(helper, SIGKILL)
            throw DaemonError(.peerHelper, "cannot give up the capabilities: \(String(cString: strerror(errno)))")
        }
        var argv =
            ([arguments[0], "--peer-helper-socket", String(pair[0])] + arguments.dropFirst()).map { strdup($0) } + [nil]
        execv("/proc/self/exe", &argv)
        kill(helper, SIGKILL)
        throw DaemonError(
            .peerHelper,
            "cannot run the daemon again without capabilities: \(String(cString: strerror(errno)))"
        )
    }

    /// Starts this program with `arguments`; of this process's inheritable descriptors (systemd's
    /// listening sockets among them) the child gets `keeping` alone.
    private static func spawn(_ arguments: [String], keeping: Int32) throws -> pid_t {
        var pid: pid_t = 0
        var argv = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        guard
            let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap({ Int32($0) }
            )
        else {
            throw DaemonError(.peerHelper, "cannot list this process's descriptors: the helper would inherit them")
        }
        for fd in open where fd > 2 && fd != keeping && fcntl(fd, F_GETFD) >= 0 && fcntl(fd, F_GETFD) & FD_CLOEXEC == 0
        {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        let rc = posix_spawn(&pid, "/proc/self/exe", &actions, nil, &argv, environ)
        guard rc == 0 else {
            throw DaemonError(.peerHelper, "cannot start the helper: \(String(cString: strerror(rc)))")
        }
        return pid
    }

    /// Whether this process holds, in its permitted, effective or ambient set, a capability over
    /// other processes' files and memory (CAP_DAC_READ_SEARCH is bit 2, CAP_SYS_PTRACE bit 19); nil
    /// when the kernel's status cannot be read (callers treat that as holding).
    public static func holdsPeerCapabilities(
        status: String? = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)
    ) -> Bool? {
        guard let status else { return nil }
        var held = false
        for set in ["CapPrm:", "CapEff:", "CapAmb:"] {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(set) }),
                let value = UInt64(line.dropFirst(set.count).trimmingCharacters(in: .whitespaces), radix: 16)
            else { return nil }
            held = held || value & (1 << 2 | 1 << 19) != 0
        }
        return held
    }

}
