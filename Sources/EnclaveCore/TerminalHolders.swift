import EnclaveProtocol

/// Whether a handed terminal is the person's trusted path for administration (our rule, issue 33):
/// a real console (a virtual console, a serial line) is; a pseudo-terminal is when every process
/// that holds its other side — the master, found by the kernel's `tty-index` in /proc — runs a
/// program root trusts to hold one (a terminal emulator, tmux, screen, sshd), judged by its
/// executable as the kernel names it. An app that made a pseudo-terminal, ran `lactl` on it and
/// typed the passcode into the master holds that master itself, and is refused. Evaluations (an
/// app opening its own items) do not ask this: the terminal serves them as before.
///
/// Programs are judged by the file they run (its device and inode, as the kernel names the file
/// behind `/proc/PID/exe`), against the listed paths as the daemon sees them — a copy elsewhere,
/// or another file mounted over a listed path in an app's own namespace, is not the program. The
/// pseudo-terminal must be one of the machine's (on the daemon's own `/dev/pts`): a pseudo-terminal
/// of an app's own devpts instance (a user namespace) would share indexes with the machine's.
///
/// Limits, said where the rule is: a program on the list that an app starts and drives (tmux's
/// `send-keys`, an X11 terminal under synthetic input, one started under the app's `LD_PRELOAD` or
/// traced by it) is trusted all the same — root shortens the list where that matters, and the
/// graphical prompt agent is the trusted path that has no such gap; a holder the daemon may not
/// read (another user's process, a non-dumpable one such as sshd's session process, for a
/// user-mode daemon; a system daemon reads them all through its privileged helper) is not seen, so a pseudo-terminal with no visible holder is refused (over
/// SSH, run `lactl` inside tmux or screen); on kernels that allow TIOCSTI (before 6.2, or with
/// `dev.tty.legacy_tiocsti = 1`), a program running in the person's own terminal can push keys
/// into it, as with sudo.
public enum TerminalHolders {
    /// A process holding a pseudo-terminal's master, and its executable (nil where the daemon may
    /// not read it).
    public struct Holder: Equatable, Sendable {
        public var pid: Int32
        /// The path `/proc/PID/exe` names (for messages), and the file it runs (for the decision).
        public var executable: String?
        public var file: AppIdentity.FileID?
        public init(pid: Int32, executable: String?, file: AppIdentity.FileID?) {
            self.pid = pid
            self.executable = executable
            self.file = file
        }
    }

    public enum Verdict: Equatable, Sendable {
        /// Not a pseudo-terminal: a virtual console or a serial line, whose other side is the machine's.
        case console
        /// Every holder of the master is trusted; the first one's executable.
        case heldBy(String)
        /// Why this terminal is not the person's (the refusal adds what to do).
        case refused(String)
    }

    /// The programs trusted to hold a terminal's other side unless root lists others
    /// (`terminal-holders`): Debian's paths of the common terminal emulators, tmux, screen and sshd.
    /// Interpreters are never on it (a script of any app would run as them).
    public static let defaultTrusted: Set<String> = [
        "/usr/bin/tmux", "/usr/bin/screen", "/usr/sbin/sshd", "/usr/lib/openssh/sshd-session",
        "/usr/libexec/gnome-terminal-server", "/usr/bin/kgx", "/usr/bin/ptyxis", "/usr/libexec/ptyxis-agent",
        "/usr/bin/konsole",
        "/usr/bin/xterm", "/usr/bin/uxterm", "/usr/bin/xfce4-terminal", "/usr/bin/mate-terminal", "/usr/bin/lxterminal",
        "/usr/bin/qterminal",
        "/usr/bin/tilix", "/usr/bin/alacritty", "/usr/bin/kitty", "/usr/bin/foot", "/usr/bin/wezterm-gui",
        "/usr/bin/rxvt-unicode", "/usr/bin/urxvt",
        "/usr/bin/st", "/usr/bin/terminology", "/usr/bin/sakura", "/usr/bin/guake", "/usr/bin/tilda",
    ]

    /// Programs of the trusted list whose terminal is not drawn on a screen of the machine: a
    /// multiplexer's server (where its clients sit decides, `TerminalMultiplexerClients`) and sshd.
    public static let notDrawnOnAScreen: Set<String> = [
        "/usr/bin/tmux", "/usr/bin/screen", "/usr/sbin/sshd", "/usr/lib/openssh/sshd-session",
    ]

    /// Whether the terminal of a PAM request from a process of the user's service manager is drawn
    /// on the seat (our rule, issue 32): its master is held by the emulator that started the
    /// terminal's shell (the session leader's parent), a program root trusts to hold a terminal
    /// (`trusted`) that draws it on a screen (not in `notOnAScreen`), itself a process of the same
    /// user's service manager — the one whose display session the request stands in. The limit
    /// of the list holds here too: a listed emulator an app starts and drives is trusted all the
    /// same.
    public static func drawnOnTheSeat(
        emulator holders: [Holder]?,
        emulatorManagerUID: UInt32?,
        requesterManagerUID: UInt32?,
        trusted: Set<AppIdentity.FileID>,
        notOnAScreen: Set<AppIdentity.FileID>
    ) -> Bool {
        guard let holders, holders.count == 1, let file = holders[0].file, trusted.contains(file),
            !notOnAScreen.contains(file), let uid = requesterManagerUID
        else { return false }
        return emulatorManagerUID == uid
    }

    /// The index of a pseudo-terminal's slave (`/dev/pts/N`: majors 136–143), nil for any other terminal.
    public static func ptyIndex(_ device: TerminalDevice) -> UInt32? { device.pseudoTerminalIndex }

    /// The machine's own terminals: virtual consoles and built-in serial lines (major 4), USB and
    /// board serial lines (166 ttyACM, 188 ttyUSB, 204 ttyAMA and kin). Anything else that is
    /// neither this nor a pseudo-terminal (a legacy BSD pseudo-terminal, an unknown driver) is refused.
    public static func isConsole(_ device: TerminalDevice) -> Bool {
        [4, 166, 188, 204].contains(device.major)
    }

    /// `onTheMachinesPseudoTerminals`: the slave lives on the daemon's own `/dev/pts`.
    /// `holders`: nil when they could not be read at all (the scan ran out of time, or a system
    /// daemon's helper did not answer).
    /// `trusted`: the listed programs' files, as the daemon sees them.
    public static func decide(
        _ device: TerminalDevice,
        onTheMachinesPseudoTerminals: Bool,
        holders: [Holder]?,
        trusted: Set<AppIdentity.FileID>
    ) -> Verdict {
        guard ptyIndex(device) != nil else {
            return isConsole(device)
                ? .console
                : .refused(
                    "this is not a terminal whose other side the daemon can tell (device \(device.major):\(device.minor))"
                )
        }
        guard onTheMachinesPseudoTerminals else {
            return .refused(
                "this pseudo-terminal is not one of the machine's (another devpts instance, such as an app's own namespace)"
            )
        }
        guard let holders else {
            return .refused(
                "the daemon could not say who holds this terminal's other side (another terminal is being checked, the machine has too many open descriptors to check in time, or too many processes hold it): try again"
            )
        }
        guard let first = holders.first else {
            return .refused(
                "the daemon cannot see who holds this terminal's other side (another user's process, or a protected one such as sshd's, for a daemon of one user)"
            )
        }
        if let stranger = holders.first(where: { $0.file.map { !trusted.contains($0) } ?? true }) {
            let who = stranger.executable ?? "a process the daemon cannot identify (pid \(stranger.pid))"
            return .refused(
                "this terminal's other side is held by \(who), which is not a terminal program root trusts for administration"
            )
        }
        return .heldBy(first.executable ?? "")
    }
}
