import Crypto
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Keeps a long-lived secret's memory off the disk: its pages locked in RAM (never written to
/// swap) and left out of any core dump (on top of the daemon's RLIMIT_CORE of 0). For the master
/// key, which lives as long as the daemon and opens everything (issue 31, item 2).
enum SecretMemory {
    /// Locks the pages that hold `key`'s bytes. swift-crypto keeps a key's bytes in one buffer
    /// that stays where it is for the key's life (a `SymmetricKey` is never mutated), so the lock
    /// holds as long as the key. Answers why it could not, nil when it did (RLIMIT_MEMLOCK is the
    /// usual reason: 8 MiB by default, far above a key's page or two).
    static func lock(_ key: SymmetricKey) -> String? {
        key.withUnsafeBytes { bytes -> String? in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return nil }
            let page = UInt(sysconf(Int32(_SC_PAGESIZE)))
            let start = UInt(bitPattern: base) & ~(page - 1)
            let end = (UInt(bitPattern: base) + UInt(bytes.count) + page - 1) & ~(page - 1)
            let pages = UnsafeMutableRawPointer(bitPattern: start)
            guard mlock(pages, Int(end - start)) == 0 else {
                return
                    "its pages could not be locked in memory (\(String(cString: strerror(errno)))): it may reach swap"
            }
            _ = madvise(pages, Int(end - start), MADV_DONTDUMP)
            return nil
        }
    }
}
