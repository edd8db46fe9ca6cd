import CPeerSocket
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What `handOverSecretInput` hands: the daemon takes secret input from a pipe only (a file's
/// read and close may wait on a program, a FUSE server, and the daemon must never wait on the
/// client's), so a regular file — `lactl … --stdin < secrets` — is read here, by the client whose
/// file it is, and its bytes handed through a pipe of this process's own. Our choice: at most
/// `fileLimit` bytes, which a pipe holds whole, so nothing waits to be written; a few lines of
/// secrets are far less.
enum SecretInputPipe {
    static let fileLimit = 4096

    /// The descriptor to hand for `descriptor`, and whether the caller must close it: `descriptor`
    /// itself unless it is a regular file (anything else the daemon judges: a pipe is taken).
    static func handing(_ descriptor: Int32) throws(EnclaveClientError) -> (descriptor: Int32, owned: Bool) {
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return (descriptor, false) }
        var bytes: [UInt8] = []
        // Never grown (a grown array leaves a copy of the secrets behind, unzeroed).
        bytes.reserveCapacity(fileLimit + 1)
        var chunk = [UInt8](repeating: 0, count: fileLimit + 1)
        defer {
            for i in bytes.indices { bytes[i] = 0 }
            for i in chunk.indices { chunk[i] = 0 }
        }
        while bytes.count <= fileLimit {
            let n = read(descriptor, &chunk, fileLimit + 1 - bytes.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else {
                throw .handoffFailed("the secret input file could not be read: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            bytes += chunk[..<n]
        }
        guard bytes.count <= fileLimit else {
            throw .handoffFailed("a secret input file holds at most \(fileLimit) bytes; pipe larger input")
        }
        var ends: [Int32] = [-1, -1]
        guard la_pipe_cloexec_nonblocking(&ends) == 0 else {
            throw .handoffFailed("no pipe for the secret input: \(String(cString: strerror(errno)))")
        }
        defer { close(ends[1]) }
        let written = bytes.isEmpty ? 0 : bytes.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            close(ends[0])
            throw .handoffFailed("the secret input did not fit a pipe")
        }
        return (ends[0], true)
    }
}
