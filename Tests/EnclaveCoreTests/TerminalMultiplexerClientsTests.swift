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
            processes[pid] = Process(pid: pid, parent: parent, name: name, alive: alive, hasTerminal: terminal)
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
        tree.add(50, "tmux: client", parent: 45, place: "seat")
        XCTAssertEqual(tree.places(of: 40), ["seat"])
        tree.add(60, "tmux: client", parent: 55, place: "ssh")
        XCTAssertEqual(tree.places(of: 40), ["seat", "ssh"], "attached over SSH as well")

        let rows: [(String, (inout Tree) -> Void, [String])] = [
            ("an ended client", { $0.add(60, "tmux: client", parent: 55, place: "ssh", alive: false) }, ["seat"]),
            // tmux's status line and scripts run command clients with no terminal.
            ("a command client", { $0.add(60, "tmux: client", parent: 20, place: nil, terminal: false) }, ["seat"]),
            ("another user's client", { $0.add(60, "tmux: client", parent: 55, uid: 1001, place: "ssh") }, ["seat"]),
            ("a name that is not tmux's", { $0.add(60, "tmux: clientx", parent: 55, place: "ssh") }, ["seat"]),
            ("a client in no session", { $0.add(60, "tmux: client", parent: 55, place: nil) }, ["none", "seat"]),
            ("the processes not listed in time", { $0.listable = false }, ["none"]),
            ("the server's owner unreadable", { $0.uids[20] = nil }, ["none"]),
            ("the requester unreadable (hidepid)", { $0.processes[40] = nil }, ["none"]),
        ]
        for (what, change, expected) in rows {
            var variant = tree
            change(&variant)
            XCTAssertEqual(variant.places(of: 40), expected, what)
        }
    }

    func testNotUnderAMultiplexerAndScreensOwnNames() {
        var tree = paneTree()
        tree.add(50, "tmux: client", parent: 45, place: "ssh")
        tree.add(90, "sudo", parent: 85, uid: 0)
        tree.add(85, "bash", parent: 1)
        XCTAssertEqual(tree.places(of: 90), [], "no multiplexer above: its clients elsewhere do not count")

        var screen = Tree()
        screen.add(20, "screen", parent: 1, terminal: false)
        screen.add(30, "bash", parent: 20)
        screen.add(40, "sudo", parent: 30, uid: 0)
        screen.add(50, "screen", parent: 45, place: "seat")
        XCTAssertEqual(screen.places(of: 40), ["seat"], "the server has no terminal: only the client counts")
        screen.add(60, "screen", parent: 55, place: "ssh")
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
        tree.add(120, "screen", parent: 115, place: "ssh")
        XCTAssertEqual(tree.places(of: 40), ["seat", "ssh"])

        // Each client runs in a pane of the next server: tmux 20 ← client 120 in screen 100 ←
        // client 220 in tmux 200 ← client 320 in screen 300 ← client 420 in tmux 400. The walk
        // stops at the fourth server: past three, no one can say where the person is.
        var deep = paneTree()
        for level: Int32 in 1...4 {
            let server = level * 100
            let tmux = level % 2 == 0
            deep.add(server, tmux ? "tmux: server" : "screen", parent: 1, terminal: false)
            deep.add(server + 10, "bash", parent: server)
            let client: Int32 = level == 1 ? 50 : (level - 1) * 100 + 20
            deep.add(client, level % 2 == 1 ? "tmux: client" : "screen", parent: server + 10, place: "seat")
        }
        deep.add(420, "tmux: client", parent: 405, place: "seat")
        XCTAssertTrue(deep.places(of: 40).contains("none"), "\(deep.places(of: 40))")
    }

    func testAProcessAsProcStatSaysIt() {
        let process = Process(stat: "4352 (tmux: client) S 4300 4352 4300 34818 4352 4194560 1 0")
        XCTAssertEqual(process, Process(pid: 4352, parent: 4300, name: "tmux: client", alive: true, hasTerminal: true))
        XCTAssertEqual(Process(stat: "7 (a) b) c) Z 42 7 7 0 -1")?.parent, 42)
        XCTAssertEqual(Process(stat: "7 (a) b) c) Z 42 7 7 0 -1")?.alive, false)
        XCTAssertEqual(Process(stat: "7 (a) b) c) Z 42 7 7 0 -1")?.name, "a) b) c")
        XCTAssertEqual(Process(stat: "7 (x) S 1 7 7 0 -1")?.hasTerminal, false)
        XCTAssertNil(Process(stat: "7 (a"))
        XCTAssertNil(Process(stat: "garbage"))
    }
}
