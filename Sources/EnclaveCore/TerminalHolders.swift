/// Whether a handed terminal is the person's trusted path for administration (our rule, issue 33):
/// a real console (a virtual console, a serial line) is; a pseudo-terminal is when every process
/// that holds its other side — the master, found by the kernel's `tty-index` in /proc — runs a
/// program root trusts to hold one (a terminal emulator, tmux, screen, sshd), judged by its
/// executable as the kernel names it. An app that made a pseudo-terminal, ran `lactl` on it and
/// typed the passcode into the master holds that master itself, and is refused. Evaluations (an
/// app opening its own items) do not ask this: the terminal serves them as before.
///
/// Limits, said where the rule is: a program on the list that an app starts and drives (tmux's
/// `send-keys`, an X11 terminal under synthetic input) is trusted all the same — root shortens the
/// list where that matters, and the graphical prompt agent is the trusted path that has no such
/// gap; a holder the daemon may not read (another user's process, a non-dumpable one such as
/// sshd's session process, for a user-mode daemon) is not seen, so a pseudo-terminal with no
/// visible holder is refused (over SSH, run `lactl` inside tmux or screen).
public enum TerminalHolders {
    /// A process holding a pseudo-terminal's master, and its executable (nil where the daemon may
    /// not read it).
    public struct Holder: Equatable, Sendable {
        public var pid: Int32
        public var executable: String?
        public init(pid: Int32, executable: String?) { self.pid = pid; self.executable = executable }
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
        "/usr/libexec/gnome-terminal-server", "/usr/bin/kgx", "/usr/bin/ptyxis", "/usr/libexec/ptyxis-agent", "/usr/bin/konsole",
        "/usr/bin/xterm", "/usr/bin/uxterm", "/usr/bin/xfce4-terminal", "/usr/bin/mate-terminal", "/usr/bin/lxterminal", "/usr/bin/qterminal",
        "/usr/bin/tilix", "/usr/bin/alacritty", "/usr/bin/kitty", "/usr/bin/foot", "/usr/bin/wezterm-gui", "/usr/bin/rxvt-unicode", "/usr/bin/urxvt",
        "/usr/bin/st", "/usr/bin/terminology", "/usr/bin/sakura", "/usr/bin/guake", "/usr/bin/tilda",
    ]

    /// The index of a pseudo-terminal's slave (`/dev/pts/N`: majors 136–143), nil for any other terminal.
    public static func ptyIndex(_ device: TerminalDevice) -> UInt32? {
        (136...143).contains(device.major) ? (device.major - 136) << 8 | device.minor : nil
    }

    public static func decide(_ device: TerminalDevice, holders: [Holder], trusted: Set<String>) -> Verdict {
        guard ptyIndex(device) != nil else { return .console }
        guard let first = holders.first else {
            return .refused("the daemon cannot see who holds this terminal's other side (another user's process, or a protected one such as sshd's)")
        }
        if let stranger = holders.first(where: { $0.executable.map { !trusted.contains($0) } ?? true }) {
            let who = stranger.executable ?? "a process the daemon cannot identify (pid \(stranger.pid))"
            return .refused("this terminal's other side is held by \(who), which is not a terminal program root trusts for administration")
        }
        return .heldBy(first.executable ?? "")
    }
}
