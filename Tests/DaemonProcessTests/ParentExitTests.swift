import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class ParentExitTests: XCTestCase {
    /// The testing kit's daemons end with the process that started them, even one killed with SIGKILL.
    func testADaemonStartedWithExitWithParentEndsWhenItsParentIsKilled() throws {
        var template = Array("/tmp/la-parent-XXXXXX".utf8CString)
        let root = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = [
            "-c",
            "\"$0\" --user --exit-with-parent --socket \"$1/run/socket\" --state-dir \"$1/state\" </dev/null >/dev/null 2>&1 & echo $!; exec sleep 60 >/dev/null",
            productPath("laenclaved"), root,
        ]
        let out = Pipe()
        shell.standardOutput = out
        try shell.run()
        let line = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self).trimmingCharacters(
            in: .whitespacesAndNewlines
        )
        let daemon = try XCTUnwrap(pid_t(line), "daemon pid from: \(line)")
        eventually("the daemon's socket") { FileManager.default.fileExists(atPath: root + "/run/socket") }
        kill(shell.processIdentifier, SIGKILL)
        shell.waitUntilExit()
        eventually("the daemon to exit after its parent died", timeout: 5) { kill(daemon, 0) != 0 }
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/run/socket"), "it shut down gracefully")
    }
}
