import EnclaveClient
import EnclaveCore
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// One user's flood of connections: bounded per user and in all, a deadline for hello, and every
/// other user still served.
final class ConnectionFloodTests: XCTestCase {
    func testAUserOverTheirConnectionLimitIsRefusedUntilOneCloses() throws {
        let enclave = try TestEnclave(.with { $0.extraArguments = ["--max-connections-per-user", "5"] })
        // The kit's own control connection is one of the five.
        _ = try enclave.status()
        // Each held connection is counted before the next one opens: hello answered.
        var held: [RawClient] = []
        for id in 1...4 {
            let client = try RawClient(path: enclave.socketPath)
            client.sendRequest(id: UInt64(id), op: "hello", args: ["version": enclaveProtocolVersion])
            XCTAssertNotNil(try client.readReply())
            held.append(client)
        }
        let over = try RawClient(path: enclave.socketPath)
        guard let refusal = try over.readReply(), let body = refusal["reply"] as? [String: Any],
              let value = body["value"] as? [String: Any] else { return XCTFail("no answer to the sixth connection") }
        XCTAssertEqual(value["code"] as? String, FailureCode.busy.rawValue, "\(refusal)")
        XCTAssertTrue((value["message"] as? String ?? "").contains("5 connections"), "\(refusal)")
        XCTAssertTrue(over.isClosed(), "and closed")
        held.removeLast().close()
        eventually("a closed connection makes room") { (try? EnclaveConnection(socketPath: enclave.socketPath)) != nil }
        XCTAssertEqual(try enclave.status().enrolledCount, 1, "the daemon serves on")
        held.forEach { $0.close() }
    }

    func testAConnectionThatNeverSaysHelloIsClosed() throws {
        let enclave = try TestEnclave(.with { $0.extraArguments = ["--hello-timeout", "1"] })
        let silent = try RawClient(path: enclave.socketPath)
        let greeted = try RawClient(path: enclave.socketPath)
        greeted.sendRequest(id: 1, op: "hello", args: ["version": enclaveProtocolVersion])
        XCTAssertNotNil(try greeted.readReply())
        let start = Date()
        XCTAssertTrue(silent.isClosed(timeout: 10), "a silent connection is closed")
        XCTAssertLessThan(Date().timeIntervalSince(start), 5)
        // One that said hello stays, past the deadline.
        Thread.sleep(forTimeInterval: 1.5)
        greeted.sendRequest(id: 2, op: "status")
        let status = try greeted.readReply()
        XCTAssertEqual((status?["reply"] as? [String: Any])?["kind"] as? String, "status", "\(String(describing: status))")
    }

    /// Attack: an unprivileged user opens 1,000 connections to the system daemon and keeps them.
    /// Before, the daemon ran out of descriptors and left everyone else unanswered.
    func testAnotherUsersFloodLeavesEveryoneElseServed() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") else {
            throw XCTSkip("needs root and runuser to act as a second user")
        }
        // The daemon starts with the descriptor limit most machines give a process (1,024), as the
        // attack found it; it may raise its own soft limit from there.
        let wrapper = NSTemporaryDirectory() + "laenclaved-nofile-\(getpid())"
        try "#!/bin/sh\nulimit -S -n 1024\nexec \"\(productPath("laenclaved"))\" \"$@\"\n".write(toFile: wrapper, atomically: true, encoding: .utf8)
        chmod(wrapper, 0o755)
        defer { unlink(wrapper) }
        let enclave = try TestEnclave(.with {
            $0.systemMode = true
            $0.daemonPath = wrapper
        })
        let script = """
            import socket, sys, time
            held = []
            deadline = time.time() + 10
            while len(held) < 1000 and time.time() < deadline:
                try:
                    s = socket.socket(socket.AF_UNIX)
                except OSError:
                    break  # the flood's own descriptor limit
                s.setblocking(False)
                try:
                    s.connect(sys.argv[1])
                    held.append(s)
                except OSError:
                    s.close()
                    time.sleep(0.001)
            print(len(held), flush=True)
            time.sleep(float(sys.argv[2]))
            """
        let flood = Process()
        flood.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        flood.arguments = ["-u", "nobody", "--", "/usr/bin/python3", "-c", script, enclave.socketPath, "20"]
        let out = Pipe(), err = Pipe()
        flood.standardOutput = out
        flood.standardError = err
        try flood.run()
        defer { flood.terminate(); flood.waitUntilExit() }
        // The flood prints how many connections it opened once it is done opening them.
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed += chunk
        }
        let opened = Int(String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        XCTAssertGreaterThan(opened, 0, "the flood connected: \(String(decoding: err.fileHandleForReading.availableData, as: UTF8.self))")
        // While the flood holds its connections, root is served at once.
        let start = Date()
        let status = try runProcess(productPath("lactl"), ["status", "--socket", enclave.socketPath], timeout: 15)
        XCTAssertEqual(status.status, 0, status.stdout + status.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(start), 5, "root waited for the flood")
        // And the flood holds at most its own budget of the daemon's descriptors (two a connection).
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(enclave.processID)/fd").count
        XCTAssertLessThan(descriptors, ConnectionBudget.descriptors(forConnections: 256), "the daemon holds \(descriptors) descriptors")
        eventually("the daemon to refuse the flood's connections over its limit (\(opened) connected): \(enclave.log().suffix(1500))") {
            enclave.log().contains("refused a connection over the limit")
        }
    }
}
