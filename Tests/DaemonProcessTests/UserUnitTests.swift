import CPeerSocket
import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The user-mode units (packaging/user): systemd --user listens on the socket and starts the unit's
/// own command at the first connection — no app starts the daemon or lends it its environment.
/// Run here as systemd would run them, with systemd-socket-activate (scripts/setup-debian installs it).
final class UserUnitTests: XCTestCase {
    private func unit(_ name: String) throws -> [String: [String]] {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: repository.appendingPathComponent("packaging/user/\(name)"), encoding: .utf8)
        var values: [String: [String]] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { values[parts[0], default: []].append(parts[1]) }
        }
        return values
    }

    func testTheFirstConnectionStartsTheUnitsDaemon() throws {
        let activate = "/usr/bin/systemd-socket-activate"
        guard FileManager.default.isExecutableFile(atPath: activate) else {
            throw XCTSkip("systemd-socket-activate is missing (scripts/setup-debian installs systemd)")
        }
        let socketUnit = try unit("laenclaved.socket")
        let serviceUnit = try unit("laenclaved.service")
        XCTAssertEqual(
            socketUnit["ListenStream"],
            ["%t/laenclaved/socket", "%t/laenclaved/socket.handoff"],
            "where clients look first ($XDG_RUNTIME_DIR), and the handoff socket beside it"
        )
        XCTAssertEqual(socketUnit["SocketMode"], ["0600"])
        var command = try XCTUnwrap(serviceUnit["ExecStart"]?.first).split(separator: " ").map(String.init)
        XCTAssertEqual(command, ["/usr/bin/laenclaved", "--user"])
        command[0] = productPath("laenclaved")

        var template = Array("/tmp/la-user-unit-XXXXXX".utf8CString)
        let root = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let runtime = root + "/runtime"
        try FileManager.default.createDirectory(
            atPath: runtime + "/laenclaved",
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let sockets = try XCTUnwrap(socketUnit["ListenStream"]).map { $0.replacingOccurrences(of: "%t", with: runtime) }
        let socket = sockets[0]
        let environment = [
            "HOME=\(root)", "XDG_RUNTIME_DIR=\(runtime)", "XDG_DATA_HOME=\(root)/data",
            "XDG_CONFIG_HOME=\(root)/config", "PATH=/usr/bin:/bin",
        ]
        let pid = try DaemonLauncher.spawn(
            activate,
            sockets.flatMap { ["-l", $0] } + environment.flatMap { ["-E", $0] } + ["--"] + command
        )
        defer {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        try eventually("the unit's socket listens") { FileManager.default.fileExists(atPath: socket) }
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: root + "/data/laenclaved"),
            "nothing runs before the first connection"
        )

        let status = try runProcess(productPath("lactl"), ["status", "--json", "--socket", socket])
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertTrue(status.stdout.contains("\"mode\" : \"user\""), status.stdout)
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: root + "/data/laenclaved/enclave.sqlite"),
            "the daemon keeps the user's state in the user's directory"
        )
        // The daemon serves the handoff socket systemd passed it (it answers garbage with a status byte).
        let handoff = try EnclaveConnection.connectSocket(EnclavePaths.handoffSocket(for: socket))
        defer { close(handoff) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(handoff, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var answer: [UInt8] = [255, 255]
        XCTAssertEqual(recv(handoff, &answer, 1, 0), 1)
        XCTAssertEqual(answer[0], Handoff.ready)
        XCTAssertEqual(send(handoff, [1, 2, 3], 3, Int32(MSG_NOSIGNAL)), 3)
        XCTAssertEqual(recv(handoff, &answer, 1, 0), 1)
        XCTAssertEqual(answer[0], HandoffStatus.malformed.rawValue)
        // The daemon is the activator's process itself (systemd-socket-activate execs it), with only
        // the environment it was given (TERM is the activator's own addition).
        let environ = try String(
            decoding: Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ")),
            as: UTF8.self
        )
        let names = Set(
            environ.split(separator: "\0").compactMap { $0.split(separator: "=", maxSplits: 1).first.map(String.init) }
        )
        XCTAssertTrue(
            names.isSubset(of: [
                "HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "PATH", "LISTEN_FDS", "LISTEN_PID",
                "LISTEN_FDNAMES", "TERM",
            ]),
            "\(names)"
        )
    }
}
