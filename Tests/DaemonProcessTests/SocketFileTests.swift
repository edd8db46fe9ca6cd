import EnclaveClient
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The socket a daemon binds itself appears with its final mode: a client that connects during
/// start-up is never refused by a socket still carrying the umask's 0700.
final class SocketFileTests: XCTestCase {
    func testTheSocketNeverAppearsWithATemporaryMode() throws {
        var template = Array("/tmp/la-socket-XXXXXX".utf8CString)
        let dir = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let socket = dir + "/run/socket"
        // Each start is a fresh race between the watcher and the daemon's bind; a few starts make
        // a socket that is visible before its chmod show up in practice.
        for start in 1...4 {
            let daemon = try DaemonLauncher.spawn(
                productPath("laenclaved"),
                [
                    "--user", "--socket", socket, "--state-dir", dir + "/state",
                    "--key-file", dir + "/master.key", "--passcode-cost", "10",
                    "--exit-with-parent", "--log-file", dir + "/log",
                ]
            )
            var info = stat()
            let deadline = Date().addingTimeInterval(20)
            while lstat(socket, &info) != 0, Date() < deadline {}
            XCTAssertEqual(info.st_mode & S_IFMT, S_IFSOCK, "start \(start): the socket appeared")
            XCTAssertEqual(info.st_mode & 0o777, 0o600, "start \(start): the socket's mode when it first appeared")
            terminateAndWait(daemon)
            XCTAssertFalse(
                FileManager.default.fileExists(atPath: socket),
                "start \(start): the daemon removes its socket"
            )
            let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: dir + "/run")) ?? []
            XCTAssertEqual(leftovers, [], "start \(start): no temporary socket is left behind")
        }
    }
}
