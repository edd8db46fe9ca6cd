import EnclaveCore
import Foundation
import XCTest

@testable import EnclaveServer

/// The /proc reads behind `TerminalMultiplexerClients`, from a /proc of the test's own: each
/// process a directory with the `stat`, `status` and `cgroup` the kernel would show.
final class TerminalMultiplexersTests: XCTestCase {
    private var proc = ""

    override func setUpWithError() throws {
        proc = NSTemporaryDirectory() + "fake-proc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: proc, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: proc) }

    private func process(
        _ pid: Int32,
        _ name: String,
        parent: Int32,
        uid: UInt32 = 1000,
        tty: Int = 34816,
        session: String? = nil
    ) throws {
        let directory = "\(proc)/\(pid)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "\(pid) (\(name)) S \(parent) \(pid) \(pid) \(tty) \(pid) 4194560\n"
            .write(toFile: directory + "/stat", atomically: true, encoding: .utf8)
        try "Name:\t\(name)\nUid:\t\(uid)\t\(uid)\t\(uid)\t\(uid)\n"
            .write(toFile: directory + "/status", atomically: true, encoding: .utf8)
        let scope = session.map { "session-\($0).scope" } ?? "init.scope"
        try "0::/user.slice/user-\(uid).slice/\(scope)\n"
            .write(toFile: directory + "/cgroup", atomically: true, encoding: .utf8)
    }

    private func places(of pid: Int32) -> [String] {
        TerminalMultiplexers.clientPlaces(of: pid, proc: proc) { cgroup in
            switch LoginSession.name(cgroup: cgroup) {
            case "3": PAMAuthenticationRules.Place(remote: false, seat: "seat0")
            case "9": PAMAuthenticationRules.Place(remote: true, seat: nil)
            default: .unknown
            }
        }.map { $0 == .unknown ? "none" : $0.remote == true ? "ssh" : "seat" }.sorted()
    }

    func testTheClientsAsProcShowsThem() throws {
        try process(20, "tmux: server", parent: 1, tty: 0)
        try process(30, "bash", parent: 20, session: "3")
        try process(40, "sudo", parent: 30, uid: 0, session: "3")
        try process(50, "tmux: client", parent: 1, session: "3")
        try process(60, "tmux: client", parent: 1, session: "9")
        try process(70, "tmux: client", parent: 20, tty: 0)
        try process(80, "tmux: client", parent: 1, uid: 1001, session: "9")
        XCTAssertEqual(places(of: 40), ["seat", "ssh"], "command clients and other users' are not attached persons")
        XCTAssertEqual(places(of: 404), ["none"], "a requester the daemon cannot read")
        try process(90, "sudo", parent: 1, uid: 0, session: "3")
        XCTAssertEqual(places(of: 90), [])
    }
}
