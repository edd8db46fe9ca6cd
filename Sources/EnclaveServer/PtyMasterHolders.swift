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
    public static func scan(index: UInt32, proc: String = "/proc") -> [TerminalHolders.Holder] {
        let wanted = "tty-index:\t\(index)"
        var holders: [TerminalHolders.Holder] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: proc)) ?? [] {
            guard let pid = Int32(entry) else { continue }
            let fds = "\(proc)/\(entry)/fd"
            guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: fds) else { continue }
            let holds = descriptors.contains { fd in
                guard isMultiplexer("\(fds)/\(fd)"),
                      let info = try? String(contentsOfFile: "\(proc)/\(entry)/fdinfo/\(fd)", encoding: .utf8) else { return false }
                return info.split(separator: "\n").contains { $0 == wanted[...] }
            }
            if holds { holders.append(.init(pid: pid, executable: link("\(proc)/\(entry)/exe"), file: fileID("\(proc)/\(entry)/exe"))) }
        }
        return holders
    }

    /// The file at `path` (links followed), as the kernel identifies it.
    public static func fileID(_ path: String) -> AppIdentity.FileID? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return AppIdentity.FileID(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }

    /// Whether the descriptor behind `path` is the pseudo-terminal multiplexer (/dev/ptmx, 5:2).
    private static func isMultiplexer(_ path: String) -> Bool {
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFCHR else { return false }
        return status.st_rdev == UInt64(5 << 8 | 2)
    }

    private static func link(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
