import EnclaveCore
import Foundation
import XCTest

@testable import EnclaveServer

/// Who looks at a request's terminal through tmux or screen, read from a /proc of the test's own:
/// each process a directory with the `stat`, `comm` and `cgroup` the kernel would show.
final class TerminalMultiplexersTests: XCTestCase {
    private var proc = ""

    override func setUpWithError() throws {
        proc = NSTemporaryDirectory() + "fake-proc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: proc, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: proc) }

    /// Process `pid` named `comm`, child of `parent`, in state `state`, in session `session`
    /// (its cgroup's scope).
    private func process(
        _ pid: Int32,
        _ comm: String,
        parent: Int32,
        state: String = "S",
        session: String? = nil
    ) throws {
        let directory = "\(proc)/\(pid)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "\(comm)\n".write(toFile: directory + "/comm", atomically: true, encoding: .utf8)
        try "\(pid) (\(comm)) \(state) \(parent) \(pid) \(pid) 34816 \(pid) 4194560\n"
            .write(toFile: directory + "/stat", atomically: true, encoding: .utf8)
        let scope = session.map { "session-\($0).scope" } ?? "init.scope"
        try "0::/user.slice/user-1000.slice/\(scope)\n".write(
            toFile: directory + "/cgroup",
            atomically: true,
            encoding: .utf8
        )
    }

    /// The session each client stands in, as the sessions' places: "3" at the seat, "9" over SSH.
    private func places(of pid: Int32) -> [String] {
        TerminalMultiplexers.clientPlaces(of: pid, proc: proc) { cgroup in
            switch LoginSession.name(cgroup: cgroup) {
            case "3": PAMAuthenticationRules.Place(remote: false, seat: "seat0")
            case "9": PAMAuthenticationRules.Place(remote: true, seat: nil)
            default: .unknown
            }
        }.map { $0.remote == nil ? "none" : $0.remote! ? "remote" : "seat" }
    }

    func testTheClientsOfTheMultiplexerAboveTheRequest() throws {
        // sudo (40) in a shell (30) in a tmux server's pane (20).
        try process(20, "tmux: server", parent: 1)
        try process(30, "bash", parent: 20, session: "3")
        try process(40, "sudo", parent: 30, session: "3")
        XCTAssertEqual(places(of: 40), [], "no client attached")

        try process(50, "tmux: client", parent: 45, session: "3")
        XCTAssertEqual(places(of: 40), ["seat"])
        try process(60, "tmux: client", parent: 55, session: "9")
        XCTAssertEqual(places(of: 40).sorted(), ["remote", "seat"], "attached over SSH as well")
        try process(70, "tmux: client", parent: 65, state: "Z", session: "9")
        XCTAssertEqual(places(of: 40).sorted(), ["remote", "seat"], "an ended client is attached to nothing")
        try process(80, "tmux: clientx", parent: 75)
        XCTAssertEqual(places(of: 40).count, 2, "only tmux's own name")

        // Not under a multiplexer: nothing, whatever clients run elsewhere.
        try process(90, "sudo", parent: 85, session: "3")
        XCTAssertEqual(places(of: 90), [])
    }

    func testAClientInsideAnotherMultiplexerIsFollowed() throws {
        // sudo (40) in tmux A (20), whose client (50) runs in a pane of screen B (100), attached
        // over SSH (120).
        try process(20, "tmux: server", parent: 1)
        try process(30, "bash", parent: 20, session: "3")
        try process(40, "sudo", parent: 30, session: "3")
        try process(100, "screen", parent: 1, session: "3")
        try process(110, "bash", parent: 100, session: "3")
        try process(50, "tmux: client", parent: 110, session: "3")
        XCTAssertEqual(places(of: 40), ["seat"], "screen with no client of its own")
        try process(120, "screen", parent: 115, session: "9")
        XCTAssertEqual(places(of: 40).sorted(), ["remote", "seat"], "screen attached over SSH")
    }

    func testTheStatFieldsAfterACommandWithSpacesAndParentheses() {
        XCTAssertEqual(TerminalMultiplexers.parentPID(stat: "7 (a) b) c) S 42 7 7 0 -1\n"), 42)
        XCTAssertNil(TerminalMultiplexers.parentPID(stat: "7 (a"))
        XCTAssertTrue(TerminalMultiplexers.isDead(stat: "7 (tmux: client) Z 1 7 7"))
        XCTAssertFalse(TerminalMultiplexers.isDead(stat: "7 (x) Z) S 1 7 7"))
        XCTAssertTrue(TerminalMultiplexers.isDead(stat: "garbage"))
    }
}
