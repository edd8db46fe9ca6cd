import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Who is on the other end of a connection, from the kernel (SO_PEERCRED) and /proc — never from
/// anything the client says.
public struct PeerIdentity: Sendable, Equatable {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32
    /// The canonical path of the client's executable: its app identity.
    public var app: String

    /// Reads the executable of `pid`. Called right after accepting, while the peer is connected.
    static func executable(of pid: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX))
        let n = buffer.withUnsafeMutableBytes { bytes in
            readlink("/proc/\(pid)/exe", bytes.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count)
        }
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n], as: UTF8.self)
    }
}

