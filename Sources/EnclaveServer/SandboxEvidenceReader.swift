import CPeerSocket
import EnclaveCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Reads what a pinned client offers for being a sandboxed app, for `SandboxIdentity` to judge: a
/// Flatpak app's `/.flatpak-info` and the instance record that names, a snap's AppArmor label and
/// the namespace snapd keeps for it.
///
/// Nothing it reads can make it wait on a program (a FUSE server, say, that never answers): every
/// file is first reached as an `O_PATH` handle, which asks FUSE nothing (a network file system may
/// still revalidate a client's root: the administrator's server, not a user's), and its mount
/// is looked up by id (`mnt_id`, from this process's own fdinfo) in the kernel's mount table
/// before anything is asked of it; the claim only from tmpfs, the record only from a local file
/// system and never across a mount (openat2's RESOLVE_NO_XDEV). The handles pin what was checked:
/// a mount placed afterwards changes nothing. Every file is regular and bounded, and a client's
/// `/proc` files are opened non-blocking (it may hold a lease on them).
enum SandboxEvidenceReader {
    static func read(process directory: Int32) -> AppIdentity.SandboxEvidence {
        guard let namespace = PeerProcess.fileID(directory, "ns/mnt") else { return AppIdentity.SandboxEvidence() }
        return AppIdentity.SandboxEvidence(
            flatpak: flatpak(directory, namespace: namespace),
            snap: snap(directory, namespace: namespace)
        )
    }

    // MARK: Flatpak

    private static func flatpak(_ directory: Int32, namespace: AppIdentity.FileID) -> SandboxIdentity.FlatpakEvidence? {
        // The daemon's own root in the daemon's own namespace: no sandbox.
        if namespace == ownNamespace, PeerProcess.link(directory, "root") == "/" { return nil }
        // The process's root as the kernel resolves it for the process (not what may be mounted on
        // top of it), then the file in it: both on tmpfs, as bubblewrap makes them.
        let root = openat(directory, "root", la_o_path | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return nil }
        defer { Glibc.close(root) }
        // The root's file system first: looking a name up in it (even for an O_PATH handle) asks it.
        guard let rootMount = mountID(root),
            let rootType = mountTypes(
                openat(directory, "mountinfo", O_RDONLY | O_NONBLOCK | O_CLOEXEC),
                of: [rootMount]
            )[rootMount],
            SandboxIdentity.mayReadClaim(on: rootType)
        else { return nil }
        let file = openat(root, ".flatpak-info", la_o_path | O_NOFOLLOW | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { Glibc.close(file) }
        // A mount on the file itself (flatpak's is one) is entered without asking it anything.
        guard let fileMount = mountID(file) else { return nil }
        let fileType =
            fileMount == rootMount
            ? rootType
            : mountTypes(openat(directory, "mountinfo", O_RDONLY | O_NONBLOCK | O_CLOEXEC), of: [fileMount])[fileMount]
        guard let fileType, SandboxIdentity.mayReadClaim(on: fileType),
            let claim = contents(file, atMost: SandboxIdentity.FlatpakInfo.maximumSize),
            let user = effectiveUser(directory)
        else { return nil }
        var evidence = SandboxIdentity.FlatpakEvidence(
            clientUser: user,
            clientNamespace: namespace,
            info: claim,
            record: nil
        )
        if let parsed = SandboxIdentity.FlatpakInfo.parse(claim) {
            evidence.record = record(instance: parsed.instanceID, user: user)
        }
        return evidence
    }

    /// Where logind keeps a user's runtime directory (`XDG_RUNTIME_DIR`), in which flatpak keeps
    /// its instance records.
    static func runtimeDirectory(user: UInt32) -> String { "/run/user/\(user)" }

    private static func record(instance: String, user: UInt32) -> SandboxIdentity.FlatpakEvidence.InstanceRecord? {
        let runtime = open(runtimeDirectory(user: user), la_o_path | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard runtime >= 0 else { return nil }
        defer { Glibc.close(runtime) }
        guard let mount = mountID(runtime),
            let type = mountTypes(open("/proc/self/mountinfo", O_RDONLY | O_NONBLOCK | O_CLOEXEC), of: [mount])[mount],
            SandboxIdentity.mayReadRecord(on: type)
        else { return nil }
        let directory = la_open_beneath(runtime, ".flatpak/\(instance)", la_o_path | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return nil }
        defer { Glibc.close(directory) }
        var info = stat()
        guard fstat(directory, &info) == 0,
            let recorded = beneath(directory, "info", atMost: SandboxIdentity.FlatpakInfo.maximumSize)
        else { return nil }
        let process = beneath(directory, "bwrapinfo.json", atMost: 4096).flatMap(
            SandboxIdentity.sandboxProcess(bwrapInfo:)
        ).flatMap(sandboxProcess)
        return .init(owner: info.st_uid, info: recorded, sandboxProcess: process)
    }

    /// The uid and mount namespace of a running process.
    private static func sandboxProcess(_ pid: Int32) -> (owner: UInt32, namespace: AppIdentity.FileID)? {
        let directory = open("/proc/\(pid)", la_o_path | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return nil }
        defer { Glibc.close(directory) }
        guard let user = effectiveUser(directory), let namespace = PeerProcess.fileID(directory, "ns/mnt") else {
            return nil
        }
        return (user, namespace)
    }

    // MARK: Snap

    private static func snap(_ directory: Int32, namespace: AppIdentity.FileID) -> SandboxIdentity.SnapEvidence? {
        guard appArmorEnabled,
            let bytes = PeerProcess.procFile(directory, "attr/apparmor/current")
                ?? PeerProcess.procFile(directory, "attr/current"),
            let label = String(validating: bytes, as: UTF8.self), let snap = SandboxIdentity.snap(label: label),
            let user = effectiveUser(directory)
        else { return nil }
        let instance = String(snap.name.dropFirst(SandboxIdentity.snapPrefix.count))
        let namespaces = SandboxIdentity.snapNamespacePaths(instance: instance, user: user).compactMap {
            PeerProcess.fileID(AT_FDCWD, $0)
        }
        return SandboxIdentity.SnapEvidence(label: label, clientNamespace: namespace, snapNamespaces: namespaces)
    }

    // MARK: Reading

    /// The daemon's mount namespace, which it never leaves.
    private static let ownNamespace = PeerProcess.fileID(AT_FDCWD, "/proc/self/ns/mnt")

    /// Whether AppArmor runs (it cannot start or stop while the system runs): without it no
    /// process has a label to read.
    private static let appArmorEnabled =
        PeerProcess.procFile(AT_FDCWD, "/sys/module/apparmor/parameters/enabled").map { $0.first == UInt8(ascii: "Y") }
        ?? false

    /// The effective uid of a process (`Uid:` in its status; the owner of `/proc/PID` is root for a
    /// process that made itself non-dumpable).
    static func effectiveUser(_ directory: Int32) -> UInt32? {
        guard let status = PeerProcess.procFile(directory, "status") else { return nil }
        for line in String(decoding: status, as: UTF8.self).split(separator: "\n") where line.hasPrefix("Uid:") {
            let ids = line.split(whereSeparator: \.isWhitespace)
            return ids.count >= 3 ? UInt32(ids[2]) : nil
        }
        return nil
    }

    /// The id of the mount a descriptor's file lies on (`mnt_id:` in this process's fdinfo: the
    /// kernel's word, no file system asked).
    private static func mountID(_ descriptor: Int32) -> Int? {
        guard let info = PeerProcess.procFile(AT_FDCWD, "/proc/self/fdinfo/\(descriptor)") else { return nil }
        for line in String(decoding: info, as: UTF8.self).split(separator: "\n") where line.hasPrefix("mnt_id:") {
            return Int(line.dropFirst("mnt_id:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// The file system types of mounts `ids`, from a mount table (`mountinfo`, closed here), read
    /// line by line until all are found, 1 MiB at most: the table's size is the client's to choose.
    private static func mountTypes(_ mountinfo: Int32, of ids: Set<Int>) -> [Int: String] {
        guard mountinfo >= 0 else { return [:] }
        defer { Glibc.close(mountinfo) }
        var found: [Int: String] = [:]
        var pending: [UInt8] = []
        // Small reads: the kernel renders only as much of the table as one read asks for, and the
        // mounts wanted (a root) are usually among the first.
        var chunk = [UInt8](repeating: 0, count: 4096)
        var total = 0
        while found.count < ids.count, total < 1 << 20 {
            let n = Glibc.read(mountinfo, &chunk, chunk.count)
            guard n > 0 else { break }
            total += n
            pending.append(contentsOf: chunk[..<n])
            var start = pending.startIndex
            while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                // The id leads the line: only a line with a wanted id is decoded.
                let line = pending[start..<end]
                let digits = line.prefix { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
                if let id = Int(String(decoding: digits, as: UTF8.self)), ids.contains(id),
                    let mount = SandboxIdentity.mount(Substring(String(decoding: line, as: UTF8.self)))
                {
                    found[mount.id] = mount.type
                }
                start = end + 1
            }
            pending.removeSubrange(..<start)
        }
        return found
    }

    /// A regular file's bytes, from an `O_PATH` handle whose mount was checked: reopened for
    /// reading through the handle (never by name again), non-blocking, at most `limit` bytes.
    private static func contents(_ handle: Int32, atMost limit: Int) -> [UInt8]? {
        var info = stat()
        guard fstat(handle, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, Int(info.st_size) <= limit else {
            return nil
        }
        let file = open("/proc/self/fd/\(handle)", O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { Glibc.close(file) }
        return PeerProcess.bounded(file, atMost: limit)
    }

    /// A regular file under `directory`, reached without crossing a mount or following a link.
    private static func beneath(_ directory: Int32, _ name: String, atMost limit: Int) -> [UInt8]? {
        let handle = la_open_beneath(directory, name, la_o_path | O_CLOEXEC)
        guard handle >= 0 else { return nil }
        defer { Glibc.close(handle) }
        return contents(handle, atMost: limit)
    }

}
