import CPeerSocket
import EnclaveCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Who holds the master of a pseudo-terminal, from the kernel's own account in /proc: every open
/// descriptor of the pseudo-terminal multiplexer (the character device 5:2, whatever path it was
/// opened by) whose fdinfo says `tty-index: N` is a master of `/dev/pts/N`, and its process a
/// holder, named by its executable (`/proc/PID/exe`: the path, and the file as device and inode).
/// Processes the daemon may not read are passed over (`TerminalHolders` refuses a terminal with no
/// holder seen). Blocking file reads, a few per descriptor: run it on `BlockingWork`
/// (administration is rare).
public enum PtyMasterHolders {
    /// Who reads the holders: this process, or — for a system daemon, which lent the capabilities
    /// to read other users' processes to its helper (`PeerHelper`) — the helper.
    enum Reader: Sendable {
        case thisProcess
        case helper(PeerHelperClient)

        /// Blocking: call it on `BlockingWork`. nil when the helper could not say. `only`: that
        /// process alone.
        func holders(index: UInt32, only: Int32? = nil) -> [TerminalHolders.Holder]? {
            switch self {
            case .thisProcess: scan(index: index, only: only)
            case .helper(let helper): helper.ptyHolders(index: index, only: only)
            }
        }
    }

    /// How long one scan may take: past it the terminal is refused (the daemon cannot say who
    /// holds it). A user with hundreds of thousands of descriptors must not hold one of a system
    /// daemon's helper workers, nor the daemon's one scan at a time, for seconds (about 7 µs a
    /// descriptor).
    public static let budget: Duration = .milliseconds(500)

    /// The holders of the master of `/dev/pts/index` — among every process, or process `only`
    /// alone (empty if it holds none); nil when the scan took longer than `budget`.
    public static func scan(
        index: UInt32,
        only: Int32? = nil,
        proc: String = "/proc",
        budget: Duration = budget
    ) -> [TerminalHolders.Holder]? {
        let wanted = "tty-index:\t\(index)"
        let deadline = ContinuousClock.now + budget
        var holders: [TerminalHolders.Holder] = []
        var outOfTime = false
        func look(_ entry: String) {
            guard let pid = Int32(entry) else { return }
            let fds = "\(proc)/\(entry)/fd"
            var holds = false
            let listed = eachEntry(of: fds, until: deadline) { fd in
                guard !holds, Int32(fd) != nil,
                    // The device first, as the kernel last knew it (a file on a mount that never
                    // answers is not asked), then the master's index from its fdinfo.
                    la_is_char_device(AT_FDCWD, "\(fds)/\(fd)", 5, 2) == 1,
                    let info = PeerProcess.procFile(AT_FDCWD, "\(proc)/\(entry)/fdinfo/\(fd)")
                else { return }
                holds = String(decoding: info, as: UTF8.self).split(separator: "\n").contains { $0 == wanted[...] }
            }
            if !listed { outOfTime = ContinuousClock.now >= deadline }
            guard holds else { return }
            let exe = "\(proc)/\(entry)/exe"
            holders.append(
                .init(pid: pid, executable: PeerProcess.link(AT_FDCWD, exe), file: PeerProcess.fileID(AT_FDCWD, exe))
            )
        }
        let finished: Bool
        if let only {
            look(String(only))
            finished = true
        } else {
            finished = eachEntry(of: proc, until: deadline, look)
        }
        return finished && !outOfTime ? holders : nil
    }

    /// Calls `body` with each entry of `directory` (not . and ..); false when the directory could
    /// not be read or `deadline` passed before the last entry.
    private static func eachEntry(
        of directory: String,
        until deadline: ContinuousClock.Instant,
        _ body: (String) -> Void
    ) -> Bool {
        guard let stream = opendir(directory) else { return false }
        defer { closedir(stream) }
        while let entry = readdir(stream) {
            if ContinuousClock.now >= deadline { return false }
            let name = PeerProcess.entryName(entry)
            if name == "." || name == ".." { continue }
            body(name)
        }
        return true
    }
}
