import EnclaveCore
import XCTest

/// Whether a handed terminal is the person's for administration, as a table.
final class TerminalHoldersTests: XCTestCase {
    func testTheOtherSideDecides() {
        let pts3 = TerminalDevice(major: 136, minor: 3), trusted: Set = ["/usr/bin/tmux", "/usr/bin/xterm"]
        let tmux = TerminalHolders.Holder(pid: 10, executable: "/usr/bin/tmux"), app = TerminalHolders.Holder(pid: 11, executable: "/home/a/app")
        let hidden = TerminalHolders.Holder(pid: 12, executable: nil)
        let rows: [(TerminalDevice, [TerminalHolders.Holder], String, String)] = [
            (TerminalDevice(major: 4, minor: 1), [], "console", "a virtual console (/dev/tty1)"),
            (TerminalDevice(major: 4, minor: 64), [], "console", "a serial line (/dev/ttyS0)"),
            (pts3, [tmux], "held by /usr/bin/tmux", "tmux's pane"),
            (pts3, [tmux, .init(pid: 13, executable: "/usr/bin/xterm")], "held by /usr/bin/tmux", "every holder trusted"),
            (pts3, [app], "refused: held by /home/a/app", "a pseudo-terminal the app made"),
            (pts3, [tmux, app], "refused: held by /home/a/app", "the app holds a copy of tmux's master"),
            (pts3, [hidden], "refused: cannot identify (pid 12)", "a holder whose executable the daemon may not read"),
            (pts3, [], "refused: cannot see", "no holder seen (sshd's, for a user daemon)"),
            (TerminalDevice(major: 143, minor: 255), [app], "refused: held by /home/a/app", "the last pts major"),
        ]
        for (device, holders, expected, why) in rows {
            let verdict = TerminalHolders.decide(device, holders: holders, trusted: trusted)
            let said = switch verdict {
            case .console: "console"
            case .heldBy(let program): "held by \(program)"
            case .refused(let reason): "refused: \(reason)"
            }
            let words = expected.replacingOccurrences(of: "refused: ", with: "")
            XCTAssertTrue(said.hasPrefix("refused") == expected.hasPrefix("refused") && said.contains(words), "\(why): \(said)")
        }
        XCTAssertEqual(TerminalHolders.ptyIndex(TerminalDevice(major: 137, minor: 2)), 258)
        XCTAssertNil(TerminalHolders.ptyIndex(TerminalDevice(major: 5, minor: 0)), "/dev/tty itself is no pseudo-terminal slave")
        XCTAssertFalse(TerminalHolders.defaultTrusted.contains { $0.hasSuffix("/python3") || $0.hasSuffix("/sh") || $0.hasSuffix("/bash") || $0.hasSuffix("/script") },
                       "no interpreter or pty-maker any app can run is trusted by default")
    }
}
