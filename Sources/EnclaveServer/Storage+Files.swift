import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's private files: directories 0700 and files 0600, written whole or not at all.
extension Storage {
    static func makePrivateDirectory(_ path: String) throws {
        try FileManager.default.createDirectory(
            atPath: path,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        chmod(path, 0o700)
    }

    /// Writes `data` to `path` (0600) whole or not at all: a new file, synced, renamed into place,
    /// the directory synced. Fails if it cannot. `beforeReplacing` runs once the new file is
    /// synced; if it throws, the file at `path` stays as it was.
    static func writePrivateFile(_ data: Data, to path: String, beforeReplacing: () throws -> Void = {}) throws {
        let temporary = path + ".new-\(getpid())"
        // A leftover of a start that died here, with the same pid: never written through.
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw DaemonError(.privateFile, "\(path) \(String(cString: strerror(errno)))") }
        _ = fchmod(fd, 0o600)
        let written = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == data.count, synced else {
            unlink(temporary)
            throw DaemonError(.privateFile, "\(path) could not be written")
        }
        do { try beforeReplacing() } catch {
            unlink(temporary)
            throw error
        }
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw DaemonError(.privateFile, "\(path) could not be written")
        }
        let directory = open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
    }
}
