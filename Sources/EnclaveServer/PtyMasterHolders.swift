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

        /// Blocking: call it on `BlockingWork`. nil when the helper could not say.
        func holders(index: UInt32) -> [TerminalHolders.Holder]? {
            switch self {
            case .thisProcess: scan(index: index)
            case .helper(let helper): helper.ptyHolders(index: index)
            }
        }
    }

    public static func scan(index: UInt32, proc: String = "/proc") -> [TerminalHolders.Holder] {
        let wanted = "tty-index:\t\(index)"
        var holders: [TerminalHolders.Holder] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: proc)) ?? [] {
            guard let pid = Int32(entry) else { continue }
            let fds = "\(proc)/\(entry)/fd"
            guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: fds) else { continue }
            let holds = descriptors.contains { fd in
                guard isMultiplexer("\(fds)/\(fd)"),
                    let info = PeerProcess.procFile(AT_FDCWD, "\(proc)/\(entry)/fdinfo/\(fd)")
                else { return false }
                return String(decoding: info, as: UTF8.self).split(separator: "\n").contains { $0 == wanted[...] }
            }
            let exe = "\(proc)/\(entry)/exe"
            if holds {
                holders.append(
                    .init(
                        pid: pid,
                        executable: PeerProcess.link(AT_FDCWD, exe),
                        file: PeerProcess.fileID(AT_FDCWD, exe)
                    )
                )
            }
        }
        return holders
    }

    /// Whether the descriptor behind `path` is the pseudo-terminal multiplexer (/dev/ptmx, 5:2).
    private static func isMultiplexer(_ path: String) -> Bool {
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFCHR else { return false }
        return status.st_rdev == UInt64(5 << 8 | 2)
    }
}
