/// A terminal as the kernel numbers it (`tty_nr` in /proc/PID/stat, and TIOCGDEV on a descriptor,
/// both in the kernel's own layout): the daemon takes a handed terminal only when it is the
/// controlling terminal of the process that hands it.
public struct TerminalDevice: Equatable, Sendable {
    public var major: UInt32
    public var minor: UInt32

    public init(major: UInt32, minor: UInt32) {
        self.major = major
        self.minor = minor
    }

    /// nil for 0: the process has no controlling terminal.
    public init?(ttyNr: Int64) {
        guard ttyNr > 0 else { return nil }
        let n = UInt64(ttyNr)
        major = UInt32((n >> 8) & 0xfff)
        minor = UInt32((n & 0xff) | ((n >> 12) & 0xfff00))
    }

    /// The index of a pseudo-terminal's slave (`/dev/pts/N`: majors 136–143), nil for any other terminal.
    public var pseudoTerminalIndex: UInt32? {
        (136...143).contains(major) ? (major - 136) << 8 | minor : nil
    }

    /// `tty_nr` in the text of /proc/PID/stat (after the command, which may hold spaces and parentheses).
    public static func controllingTerminal(stat text: String) -> TerminalDevice? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // state, ppid, pgrp, session, tty_nr
        guard fields.count > 4, let n = Int64(fields[4]) else { return nil }
        return TerminalDevice(ttyNr: n)
    }
}
