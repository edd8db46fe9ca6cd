import EnclaveCore
import EnclaveProtocol
import XCTest

/// Whether a handed terminal is the person's for administration, as a table.
final class TerminalHoldersTests: XCTestCase {
    func testTheOtherSideDecides() {
        let pts3 = TerminalDevice(major: 136, minor: 3)
        let tmuxFile = AppIdentity.FileID(device: 1, inode: 10)
        let xtermFile = AppIdentity.FileID(device: 1, inode: 11)
        let trusted: Set = [tmuxFile, xtermFile]
        let tmux = TerminalHolders.Holder(pid: 10, executable: "/usr/bin/tmux", file: tmuxFile)
        let app = TerminalHolders.Holder(pid: 11, executable: "/home/a/app", file: .init(device: 1, inode: 99))
        let hidden = TerminalHolders.Holder(pid: 12, executable: nil, file: nil)
        // A file mounted over /usr/bin/tmux in an app's namespace: the path reads the same, the file is not.
        let impostor = TerminalHolders.Holder(pid: 14, executable: "/usr/bin/tmux", file: .init(device: 7, inode: 10))
        let rows: [(TerminalDevice, Bool, [TerminalHolders.Holder]?, String, String)] = [
            (TerminalDevice(major: 4, minor: 1), true, [], "console", "a virtual console (/dev/tty1)"),
            (TerminalDevice(major: 4, minor: 64), true, [], "console", "a serial line (/dev/ttyS0)"),
            (TerminalDevice(major: 188, minor: 0), true, [], "console", "a USB serial line (/dev/ttyUSB0)"),
            (TerminalDevice(major: 3, minor: 0), true, [], "refused: whose other side", "a legacy BSD pseudo-terminal"),
            (pts3, true, [tmux], "held by /usr/bin/tmux", "tmux's pane"),
            (
                pts3, true, [tmux, .init(pid: 13, executable: "/usr/bin/xterm", file: xtermFile)],
                "held by /usr/bin/tmux", "every holder trusted"
            ),
            (
                pts3, false, [tmux], "refused: not one of the machine's",
                "an app's own devpts instance, whose index 3 is also tmux's"
            ),
            (pts3, true, [app], "refused: held by /home/a/app", "a pseudo-terminal the app made"),
            (pts3, true, [tmux, app], "refused: held by /home/a/app", "the app holds a copy of tmux's master"),
            (
                pts3, true, [impostor], "refused: held by /usr/bin/tmux, which is not",
                "another file under a trusted path"
            ),
            (
                pts3, true, [hidden], "refused: cannot identify (pid 12)",
                "a holder whose executable the daemon may not read"
            ),
            (pts3, true, [], "refused: cannot see", "no holder seen (sshd's, for a user daemon)"),
            (pts3, true, nil, "refused: could not say", "a system daemon's helper that did not answer"),
            (TerminalDevice(major: 4, minor: 1), true, nil, "console", "a console needs no holder"),
            (TerminalDevice(major: 143, minor: 255), true, [app], "refused: held by /home/a/app", "the last pts major"),
        ]
        for (device, machines, holders, expected, why) in rows {
            let verdict = TerminalHolders.decide(
                device,
                onTheMachinesPseudoTerminals: machines,
                holders: holders,
                trusted: trusted
            )
            let said =
                switch verdict {
                case .console: "console"
                case .heldBy(let program): "held by \(program)"
                case .refused(let reason): "refused: \(reason)"
                }
            let words = expected.replacingOccurrences(of: "refused: ", with: "")
            XCTAssertTrue(
                said.hasPrefix("refused") == expected.hasPrefix("refused") && said.contains(words),
                "\(why): \(said)"
            )
        }
        XCTAssertEqual(TerminalHolders.ptyIndex(TerminalDevice(major: 137, minor: 2)), 258)
        XCTAssertNil(
            TerminalHolders.ptyIndex(TerminalDevice(major: 5, minor: 0)),
            "/dev/tty itself is no pseudo-terminal slave"
        )
        XCTAssertFalse(
            TerminalHolders.defaultTrusted.contains {
                $0.hasSuffix("/python3") || $0.hasSuffix("/sh") || $0.hasSuffix("/bash") || $0.hasSuffix("/script")
            },
            "no interpreter or pty-maker any app can run is trusted by default"
        )
    }

    /// A terminal of the user's service manager is drawn on the seat (a PAM request's rule): its
    /// master held by the emulator that started its shell alone, a listed program that draws on a
    /// screen, of the same user's service manager.
    func testATerminalDrawnOnTheSeat() {
        let xtermFile = AppIdentity.FileID(device: 1, inode: 11)
        let tmuxFile = AppIdentity.FileID(device: 1, inode: 10)
        let xterm = TerminalHolders.Holder(pid: 13, executable: "/usr/bin/xterm", file: xtermFile)
        let rows: [([TerminalHolders.Holder]?, UInt32?, Bool, String)] = [
            ([xterm], 1000, true, "a listed emulator of the same service manager"),
            ([xterm], 1001, false, "an emulator of another user's service manager"),
            ([xterm], nil, false, "an emulator in no service manager"),
            ([], 1000, false, "the emulator does not hold the terminal"),
            (nil, 1000, false, "the helper could not say"),
            ([.init(pid: 13, executable: "/opt/ttyd", file: .init(device: 1, inode: 99))], 1000, false, "not listed"),
            ([.init(pid: 13, executable: nil, file: nil)], 1000, false, "unreadable"),
            ([.init(pid: 10, executable: "/usr/bin/tmux", file: tmuxFile)], 1000, false, "a multiplexer's server"),
        ]
        for (holders, manager, expected, why) in rows {
            XCTAssertEqual(
                TerminalHolders.drawnOnTheSeat(
                    emulator: holders,
                    emulatorManagerUID: manager,
                    requesterManagerUID: 1000,
                    trusted: [xtermFile, tmuxFile],
                    notOnAScreen: [tmuxFile]
                ),
                expected,
                why
            )
        }
    }
}
