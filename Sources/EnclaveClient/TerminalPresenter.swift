import EnclaveProtocol
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Shows the authentication prompt on the process's controlling terminal and reads the person's
/// keys with echo off, while the daemon keeps the sensor armed: typing the passcode never waits
/// for the sensor. Keys: the passcode then Enter; Esc or Ctrl-C cancels; Ctrl-F is the fallback
/// button; Ctrl-R is "Try Face ID Again"; with a simulated sensor Ctrl-T is a matching touch and
/// Ctrl-N a non-matching one.
///
/// Trust note: the typed passcode passes through this (the app's) process on its way to the
/// daemon, as with pinentry-curses or sudo in the same terminal. docs/architecture.md says more.
final class TerminalPresenter: @unchecked Sendable {
    enum Action { case prompt(PromptAction), simulated(SimulatedEvent) }

    /// Every presenter of the process works on this queue, in the order the daemon's replies
    /// arrive: one prompt's close always comes before the next prompt's first screen, so two
    /// prompts never read the terminal at once.
    private static let terminal = DispatchQueue(label: "LocalAuthentication.terminal")

    var onAction: ((Action, String?) -> Void)? {
        get { lock.withLock { _onAction } }
        set { lock.withLock { _onAction = newValue } }
    }
    private var _onAction: ((Action, String?) -> Void)?
    private let fd: Int32
    private var saved = termios()
    private let lock = NSLock()
    private var screen: PromptScreen?
    private var typed: [UInt8] = []
    private var stopPipe: [Int32] = [-1, -1]
    private var reader: Thread?
    private var isClosed = false

    /// nil when the process has no controlling terminal (daemons, CI, tests) or runs as a
    /// background job of it: headless mode. A background job that touched the terminal's modes
    /// would be stopped by SIGTTOU and hang; the foreground job owns the keyboard.
    static func open() -> TerminalPresenter? {
        let fd = Glibc.open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        guard isatty(fd) == 1, tcgetpgrp(fd) == getpgrp() else { Glibc.close(fd); return nil }
        return TerminalPresenter(fd: fd)
    }

    private init(fd: Int32) { self.fd = fd }

    /// Raw mode and the key reader start with the first screen: a call that needs no prompt
    /// leaves the terminal alone.
    private func startReading() {
        tcgetattr(fd, &saved)
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        tcsetattr(fd, TCSANOW, &raw)
        pipe(&stopPipe)
        let t = Thread { [self] in readKeys() }
        t.name = "LocalAuthentication.prompt"
        reader = t
        t.start()
    }

    func show(_ s: PromptScreen) { Self.terminal.async { self.render(s) } }

    /// Ends the prompt (restoring the terminal) once everything queued before it is shown.
    func close(result: String? = nil) { Self.terminal.sync { self.finish(result: result) } }

    private func render(_ s: PromptScreen) {
        let first = lock.withLock { () -> Bool in defer { screen = s }; return screen == nil && !isClosed }
        var lines: [String] = []
        if first {
            startReading()
            lines.append("")
            lines.append("┌─ \(s.app) wants to confirm it is you")
            lines.append("│  \(s.reason)")
        }
        lines.append("│  \(s.instruction)")
        var keys: [String] = []
        if s.passcodeEntry { keys.append("type the passcode + Enter") }
        if s.retryOffered { keys.append("Ctrl-R: Try \(s.sensorName ?? "Again") Again") }
        if let f = s.fallbackTitle { keys.append("Ctrl-F: \(f)") }
        keys.append("Esc: \(s.cancelTitle)")
        lines.append("│  [" + keys.joined(separator: " · ") + "]")
        if let warning = s.warning { lines.append("│  \(warning)") }
        if s.sensorSimulated && s.sensorArmed { lines.append("│  simulated \(s.sensorName ?? "sensor"): Ctrl-T matching touch · Ctrl-N non-matching touch") }
        write(lines.joined(separator: "\r\n") + "\r\n")
    }

    private func finish(result: String?) {
        let (wasClosed, shown) = lock.withLock { () -> (Bool, Bool) in defer { isClosed = true }; return (isClosed, screen != nil) }
        guard !wasClosed else { return }
        if shown {
            var one: UInt8 = 1
            Glibc.write(stopPipe[1], &one, 1)
            while reader?.isFinished == false { usleep(1000) }
            tcsetattr(fd, TCSANOW, &saved)
            write("└─ " + (result ?? "done") + "\r\n")
            Glibc.close(stopPipe[0])
            Glibc.close(stopPipe[1])
        }
        Glibc.close(fd)
    }

    private func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    private func readKeys() {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0)]
        while true {
            guard poll(&fds, 2, -1) >= 0 || errno == EINTR else { return }
            if fds[1].revents != 0 { return }
            guard fds[0].revents & Int16(POLLIN) != 0 else {
                if fds[0].revents != 0 { return }
                continue
            }
            var byte: UInt8 = 0
            guard Glibc.read(fd, &byte, 1) == 1 else { return }
            handle(byte)
        }
    }

    private func handle(_ byte: UInt8) {
        let s = lock.withLock { screen }
        switch byte {
        case 27, 3: // Esc, Ctrl-C
            if byte == 27, drainEscapeSequence() { return }
            onAction?(.prompt(.cancel), nil)
        case 6: if s?.fallbackTitle != nil { onAction?(.prompt(.fallback), nil) }
        case 18: if s?.retryOffered == true { onAction?(.prompt(.retry), nil) }
        case 20: if s?.sensorSimulated == true { onAction?(.simulated(.match), nil) }
        case 14: if s?.sensorSimulated == true { onAction?(.simulated(.nomatch), nil) }
        case 13, 10:
            let passcode = lock.withLock { () -> String? in
                defer { typed.removeAll() }
                return typed.isEmpty ? nil : String(decoding: typed, as: UTF8.self)
            }
            if let passcode, s?.passcodeEntry == true {
                write("│  checking…\r\n")
                onAction?(.prompt(.passcode), passcode)
            }
        case 127, 8: lock.withLock { _ = typed.popLast() }
        default:
            if byte >= 32, s?.passcodeEntry == true {
                lock.withLock { if typed.count < WireLimits.maxPasscodeBytes { typed.append(byte) } }
            }
        }
    }

    /// Arrow keys and the like arrive as ESC [ …: swallow them rather than cancel.
    private func drainEscapeSequence() -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 30) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 16)
        _ = Glibc.read(fd, &buffer, buffer.count)
        return true
    }
}
