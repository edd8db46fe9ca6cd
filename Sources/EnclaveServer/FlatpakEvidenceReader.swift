import CPeerSocket
import EnclaveCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads what a pinned client offers for being a Flatpak app, for `SandboxIdentity.verify` to judge:
/// its `/.flatpak-info` and the instance record that names. Reads nothing a program could make the
/// daemon wait on: the client's root and that file only on tmpfs, the record only where no FUSE
/// mount lies on its path, every file non-blocking, bounded and regular, no symbolic link followed.
enum FlatpakEvidenceReader {
    /// The evidence for the process whose `/proc/PID` is `directory` (nil: it makes no Flatpak
    /// claim the daemon can read — an ordinary process, or one whose root could hang the read).
    static func read(process directory: Int32) -> SandboxIdentity.FlatpakEvidence? {
        var info = stat()
        guard fstat(directory, &info) == 0, let namespace = PeerProcess.fileID(directory, "ns/mnt") else { return nil }
        let user = info.st_uid
        // The daemon's own root in the daemon's own namespace: no sandbox, nothing more to read.
        if namespace == PeerProcess.fileID(AT_FDCWD, "/proc/self/ns/mnt"), PeerProcess.link(directory, "root") == "/" { return nil }
        guard let mountinfo = contents(directory, "mountinfo", atMost: 1 << 20),
              SandboxIdentity.flatpakInfoIsSafeToRead(mounts: SandboxIdentity.mounts(String(decoding: mountinfo, as: UTF8.self))),
              let claim = contents(directory, "root/.flatpak-info", atMost: SandboxIdentity.FlatpakInfo.maximumSize) else { return nil }
        var evidence = SandboxIdentity.FlatpakEvidence(clientUser: user, clientNamespace: namespace, info: claim, record: nil)
        if let parsed = SandboxIdentity.FlatpakInfo.parse(claim) { evidence.record = record(instance: parsed.instanceID, user: user) }
        return evidence
    }

    /// Where logind keeps a user's runtime directory (`XDG_RUNTIME_DIR`), in which flatpak keeps
    /// its instance records.
    static func instancesDirectory(user: UInt32) -> String { "/run/user/\(user)/.flatpak" }

    private static func record(instance: String, user: UInt32) -> SandboxIdentity.FlatpakEvidence.InstanceRecord? {
        let path = "\(instancesDirectory(user: user))/\(instance)"
        guard let own = contents(AT_FDCWD, "/proc/self/mountinfo", atMost: 1 << 20),
              SandboxIdentity.isLocal(path, mounts: SandboxIdentity.mounts(String(decoding: own, as: UTF8.self))) else { return nil }
        var dir = open("/", la_o_path | O_DIRECTORY | O_CLOEXEC)
        for component in path.split(separator: "/") where dir >= 0 {
            let next = openat(dir, String(component), la_o_path | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            Glibc.close(dir)
            dir = next
        }
        guard dir >= 0 else { return nil }
        defer { Glibc.close(dir) }
        var info = stat()
        guard fstat(dir, &info) == 0, let recorded = contents(dir, "info", atMost: SandboxIdentity.FlatpakInfo.maximumSize) else { return nil }
        let process = contents(dir, "bwrapinfo.json", atMost: 4096).flatMap(SandboxIdentity.sandboxProcess(bwrapInfo:)).flatMap(sandboxProcess)
        return .init(owner: info.st_uid, info: recorded, sandboxProcess: process)
    }

    /// The uid and mount namespace of a running process.
    private static func sandboxProcess(_ pid: Int32) -> (owner: UInt32, namespace: AppIdentity.FileID)? {
        let directory = open("/proc/\(pid)", la_o_path | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return nil }
        defer { Glibc.close(directory) }
        var info = stat()
        guard fstat(directory, &info) == 0, let namespace = PeerProcess.fileID(directory, "ns/mnt") else { return nil }
        return (info.st_uid, namespace)
    }

    /// A regular file's bytes, if it has at most `limit` of them; never following a symbolic link
    /// at its last component, never waiting on a FIFO.
    private static func contents(_ directory: Int32, _ path: String, atMost limit: Int) -> [UInt8]? {
        let file = openat(directory, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { Glibc.close(file) }
        var info = stat()
        guard fstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = Glibc.read(file, &chunk, chunk.count)
            guard n >= 0 else { return nil }
            if n == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<n])
            guard bytes.count <= limit else { return nil }
        }
    }
}
