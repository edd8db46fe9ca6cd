import XCTest

@testable import EnclaveCore

/// Who looks at a request's terminal through tmux or screen: table rows over a process tree, each
/// client's place named by its session ("seat", "ssh", or none).
final class TerminalMultiplexerClientsTests: XCTestCase {
    typealias Process = TerminalMultiplexerClients.Process

    private struct Tree {
        var processes: [Int32: Process] = [:]
        var uids: [Int32: UInt32] = [:]
        var places: [Int32: String] = [:]
        var listable = true

        mutating func add(
            _ pid: Int32,
            _ name: String,
            parent: Int32,
            uid: UInt32 = 1000,
            place: String? = nil,
            alive: Bool = true,
            terminal: Bool = true
        ) {
            processes[pid] = Process(
                pid: pid,
                parent: parent,
                name: name,
                alive: alive,
                hasTerminal: terminal,
                uid: uid
            )
            uids[pid] = uid
            places[pid] = place
        }

        func places(of pid: Int32) -> [String] {
            TerminalMultiplexerClients.places(
                of: pid,
                process: { processes[$0] },
                everyProcess: { listable ? Array(processes.values) : nil },
                uid: { uids[$0] },
                place: { pid in
                    switch places[pid] {
                    case "seat": PAMAuthenticationRules.Place(remote: false, seat: "seat0")
                    case "ssh": PAMAuthenticationRules.Place(remote: true, seat: nil)
                    default: .unknown
                    }
                }
            ).map { $0 == .unknown ? "none" : $0.remote == true ? "ssh" : "seat" }.sorted()
        }
    }

    /// sudo (40) in a shell (30) in a pane of tmux server 20.
    private func paneTree() -> Tree {
        var tree = Tree()
        tree.add(20, "tmux: server", parent: 1, terminal: false)
        tree.add(30, "bash", parent: 20)
        tree.add(40, "sudo", parent: 30, uid: 0)
        return tree
    }

    func testTheClientsAttachedToTheServerAboveTheRequest() {
        var tree = paneTree()
        XCTAssertEqual(tree.places(of: 40), [], "nothing attached")
        tree.add(50, "tmux: client", parent: 1, place: "seat")
        XCTAssertEqual(tree.places(of: 40), ["seat"])
        tree.add(60, "tmux: client", parent: 1, place: "ssh")
        XCTAssertEqual(tree.places(of: 40), ["seat", "ssh"], "attached over SSH as well")

        let rows: [(String, (inout Tree) -> Void, [String])] = [
            ("an ended client", { $0.add(60, "tmux: client", parent: 1, place: "ssh", alive: false) }, ["seat"]),
            // tmux's status line and scripts run command clients with no terminal.
            ("a command client", { $0.add(60, "tmux: client", parent: 20, place: nil, terminal: false) }, ["seat"]),
            ("another user's client", { $0.add(60, "tmux: client", parent: 1, uid: 1001, place: "ssh") }, ["seat"]),
            ("a name that is not tmux's", { $0.add(60, "tmux: clientx", parent: 1, place: "ssh") }, ["seat"]),
            ("a client in no session", { $0.add(60, "tmux: client", parent: 1, place: nil) }, ["none", "seat"]),
            ("the processes not listed in time", { $0.listable = false }, ["none"]),
            ("the server's owner unreadable", { $0.uids[20] = nil }, ["none"]),
            ("the requester unreadable (hidepid)", { $0.processes[40] = nil }, ["none"]),
            ("a parent on the way up unreadable", { $0.processes[30] = nil }, ["none"]),
        ]
        for (what, change, expected) in rows {
            var variant = tree
            change(&variant)
            XCTAssertEqual(variant.places(of: 40), expected, what)
        }
    }

    func testNotUnderAMultiplexerAndScreensOwnNames() {
        var tree = paneTree()
        tree.add(50, "tmux: client", parent: 1, place: "ssh")
        tree.add(90, "sudo", parent: 85, uid: 0)
        tree.add(85, "bash", parent: 1)
        XCTAssertEqual(tree.places(of: 90), [], "no multiplexer above: its clients elsewhere do not count")

        var screen = Tree()
        screen.add(20, "screen", parent: 1, terminal: false)
        screen.add(30, "bash", parent: 20)
        screen.add(40, "sudo", parent: 30, uid: 0)
        screen.add(50, "screen", parent: 1, place: "seat")
        XCTAssertEqual(screen.places(of: 40), ["seat"], "the server has no terminal: only the client counts")
        screen.add(60, "screen", parent: 1, place: "ssh")
        XCTAssertEqual(screen.places(of: 40), ["seat", "ssh"])
    }

    /// A client inside another multiplexer is followed: tmux's client (50) runs in a pane of
    /// screen (100), attached over SSH (120). Deeper than three, no one can say.
    func testAClientInsideAnotherMultiplexerIsFollowed() {
        var tree = paneTree()
        tree.add(100, "screen", parent: 1, terminal: false)
        tree.add(110, "bash", parent: 100)
        tree.add(50, "tmux: client", parent: 110, place: "seat")
        XCTAssertEqual(tree.places(of: 40), ["seat"])
        tree.add(120, "screen", parent: 1, place: "ssh")
        XCTAssertEqual(tree.places(of: 40), ["seat", "ssh"])

    }

    /// Nested three deep (tmux 20 ← its client 50 in screen 100 ← its client 150 in tmux 200),
    /// every place is known; a fourth server (150's client 250 in screen 300) is past the limit.
    /// Each server is another user's here, so each has exactly one client.
    func testTheWalkStopsThreeServersDeep() {
        var tree = paneTree()
        tree.add(100, "screen", parent: 1, uid: 1001, terminal: false)
        tree.add(110, "bash", parent: 100, uid: 1001)
        tree.add(50, "tmux: client", parent: 110, place: "seat")
        tree.add(200, "tmux: server", parent: 1, uid: 1002, terminal: false)
        tree.add(210, "bash", parent: 200, uid: 1002)
        tree.add(150, "screen", parent: 210, uid: 1001, place: "seat")
        XCTAssertEqual(tree.places(of: 40), ["seat", "seat"], "three servers: every place known")
        tree.add(300, "screen", parent: 1, uid: 1003, terminal: false)
        tree.add(310, "bash", parent: 300, uid: 1003)
        tree.add(250, "tmux: client", parent: 310, uid: 1002, place: "seat")
        XCTAssertEqual(tree.places(of: 40), ["none", "seat", "seat", "seat"], "a fourth: no one can say")
    }

    func testAProcessAsProcStatSaysIt() {
        let process = Process(stat: "4352 (tmux: client) S 4300 4352 4300 34818 4352 4194560 1 0")
        var expected = Process(pid: 4352, parent: 4300, name: "tmux: client", alive: true, hasTerminal: true)
        expected.session = 4300
        XCTAssertEqual(process, expected)
        XCTAssertEqual(Process(stat: "7 (a) b) c) Z 42 7 7 0 -1")?.parent, 42)
        XCTAssertEqual(Process(stat: "7 (a) b) c) Z 42 7 7 0 -1")?.alive, false)
        XCTAssertEqual(Process(stat: "7 (a) b) c) Z 42 7 7 0 -1")?.name, "a) b) c")
        XCTAssertEqual(Process(stat: "7 (x) S 1 7 7 0 -1")?.hasTerminal, false)
        XCTAssertNil(Process(stat: "7 (a"))
        XCTAssertNil(Process(stat: "garbage"))
    }
}
