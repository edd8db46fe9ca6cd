import EnclaveCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// /etc/subuid as `SubordinateIDs` (`ShareOwner`). A look-up never waits: it is one `stat`, and
/// when the file changed since it was read (its inode, size or change time), a thread of its own
/// (`la-subuid`) reads it again — owners are named, and the account database (NSS: sssd, LDAP) may
/// be slow — while the look-up answers what was read last. No file: no ranges.
/// - A read that fails (no descriptor left, a file over `largest`) keeps what was read before,
///   and is tried again after a second.
/// - An owner no account is found for is left out, and the file read again after `retryAfter`
///   seconds: a directory service still starting must not drop a user's ranges for good.
final class SubordinateIDFile: Sendable {
    static let system = SubordinateIDFile(path: "/etc/subuid")
    /// Read whole up to this; a real one holds a line per account.
    static let largest = 1 << 20
    static let retryAfter: Double = 30

    let path: String
    private struct Cached {
        var stamp: [Int64] = []
        var ids = SubordinateIDs()
        var retryAt: Double?
        var reading = false
    }
    private let cached = Mutex(Cached())

    init(path: String) { self.path = path }

    /// What was read last, with no `stat` and no reading: for the handoff loop, whose descriptor
    /// table of its own must not meet the account database's cached descriptors.
    var lastRead: SubordinateIDs { cached.withLock { $0.ids } }

    /// What was read last; reads the file again, on a thread of its own, when it changed.
    var current: SubordinateIDs {
        let stamp = Self.stamp(of: path)
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        let (ids, due) = cached.withLock { cached -> (SubordinateIDs, Bool) in
            let due = cached.stamp != stamp || cached.retryAt.map { now >= $0 } == true
            guard due, !cached.reading else { return (cached.ids, false) }
            cached.reading = true
            return (cached.ids, true)
        }
        if due { startThread(named: "la-subuid") { self.readAgain() } }
        return ids
    }

    /// Reads the file now, on the caller's thread, and keeps what it read (tests; `current`'s thread).
    func readAgain() {
        let stamp = Self.stamp(of: path)
        let read = read()
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        // Changed within the file clock's tick (a second on some file systems) before the read: a
        // rewrite of the same size in that tick would leave the same stamp, so read once more.
        let recent = stamp.count == 5 && abs(Double(time(nil)) - Double(stamp[3])) < 2
        cached.withLock { cached in
            cached.reading = false
            cached.stamp = stamp
            switch read {
            case .read(let ids, let complete):
                cached.ids = ids
                cached.retryAt = complete && !recent ? nil : now + (complete ? 2 : Self.retryAfter)
            case .failed:
                cached.retryAt = now + 1
            }
        }
    }

    private enum Read {
        case read(SubordinateIDs, complete: Bool)
        case failed
    }

    private func read() -> Read {
        let file = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else { return errno == ENOENT ? .read(SubordinateIDs(), complete: true) : .failed }
        defer { close(file) }
        guard let bytes = PeerProcess.bounded(file, atMost: Self.largest) else { return .failed }
        var complete = true
        let ids = SubordinateIDs(parsing: String(decoding: bytes, as: UTF8.self)[...]) { name in
            let uid = accountUID(name: name)
            if uid == nil { complete = false }
            return uid
        }
        return .read(ids, complete: complete)
    }

    /// The file's device, inode, size and change time; empty when it is not there.
    private static func stamp(of path: String) -> [Int64] {
        var info = stat()
        guard stat(path, &info) == 0 else { return [] }
        return [
            Int64(bitPattern: UInt64(info.st_dev)), Int64(bitPattern: UInt64(info.st_ino)), Int64(info.st_size),
            Int64(info.st_ctim.tv_sec), Int64(info.st_ctim.tv_nsec),
        ]
    }

}
