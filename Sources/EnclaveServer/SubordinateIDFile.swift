import EnclaveCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// /etc/subuid as `SubordinateIDs` (`ShareOwner`), read again only when the file changed (its
/// inode, size or change time): a connection's look-up is one `stat`. No file: no ranges.
final class SubordinateIDFile: Sendable {
    static let system = SubordinateIDFile(path: "/etc/subuid")
    /// Read whole up to this; a larger file is taken as none (a real one holds a line per account).
    static let largest = 1 << 20

    let path: String
    private struct Cached {
        var stamp: [Int64] = []
        var ids = SubordinateIDs()
    }
    private let cached = Mutex(Cached())

    init(path: String) { self.path = path }

    var current: SubordinateIDs {
        var info = stat()
        guard stat(path, &info) == 0 else { return SubordinateIDs() }
        let stamp = [
            Int64(bitPattern: UInt64(info.st_dev)), Int64(bitPattern: UInt64(info.st_ino)), Int64(info.st_size),
            Int64(info.st_ctim.tv_sec), Int64(info.st_ctim.tv_nsec),
        ]
        if let ids = cached.withLock({ $0.stamp == stamp ? $0.ids : nil }) { return ids }
        let ids = read()
        cached.withLock { $0 = Cached(stamp: stamp, ids: ids) }
        return ids
    }

    private func read() -> SubordinateIDs {
        let file = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else { return SubordinateIDs() }
        defer { close(file) }
        guard let bytes = PeerProcess.bounded(file, atMost: Self.largest) else { return SubordinateIDs() }
        return SubordinateIDs(parsing: String(decoding: bytes, as: UTF8.self)[...], uidOf: accountUID(name:))
    }
}
