import CPeerSocket
import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One prompt on the terminal a client handed over (`HandedDescriptors`): the daemon draws the
/// screens and reads the person's keys (raw mode, echo off) on threads of the prompt's own, and
/// what the person does goes straight into the evaluation. The app's process never sees a key.
///
/// The daemon draws on an open file description of the terminal of its own, non-blocking: a
/// stopped or flooded terminal does not block the daemon (a screen that cannot be written within
/// `writeTimeout` is cut short). Not the one the client handed: `O_NONBLOCK` belongs to the open
/// file description, and a client that cleared it on the copy it kept could block the prompt's
/// writer. When the daemon cannot open the terminal (always for the packaged system daemon: its
/// own user, no devices; a handed /dev/tty; a terminal of another user, or one its client made
/// unreadable or exclusive) it uses the client's, made non-blocking, and a write such a client
/// blocks is interrupted at the same deadline (`SystemCallDeadline`): it holds the prompt's writer
/// for at most `writeTimeout`, never a thread of the daemon's for good, the prompt's close, or the
/// daemon's stop (docs/architecture.md).
///
/// Unchecked: a thin owner of the terminal's descriptor. `saved`, `stopPipe`, `reader` and
/// `cutShort` are set and read only on `writer`'s thread (the reader thread reads `stopPipe` after
/// `startReading` set it there, before it started); the rest is in `keys`.
final class TerminalPrompt: @unchecked Sendable {
    private let fd: Int32
    private let onAction: @Sendable (PromptKeyboard.Action) -> Void
    private let onLost: @Sendable () -> Void
    private let logger: Logger
    /// Screens, the passcode's "checking" line and the closing line, in the order they were made.
    private let writer = SerialThread(name: "laenclaved.prompt-screen")
    private struct Keys {
        var keyboard = PromptKeyboard()
        var screen: PromptScreen?
        var started = false
        var closed = false
    }
    private let keys = Mutex(Keys())
    private var saved = termios()
    private var stopPipe: [Int32] = [-1, -1]
    /// The key reader, once started (set and read only on `writer`'s thread, as `stopPipe`).
    private var reader: LoopThread?
    /// A write of this prompt's was cut short at its deadline (logged once a prompt).
    private var cutShort = false

    /// Takes ownership of `fd`.
    private init(
        fd: Int32,
        logger: Logger,
        onAction: @escaping @Sendable (PromptKeyboard.Action) -> Void,
        onLost: @escaping @Sendable () -> Void
    ) {
        self.fd = Self.ownDescription(of: fd)
        self.logger = logger
        self.onAction = onAction
        self.onLost = onLost
    }

    deinit { writer.finish() }

    /// A prompt of `session`'s on the terminal in `descriptors`, or nil when none was handed.
    static func on(
        _ descriptors: HandedDescriptors,
        for session: UserSession,
        onAction: @escaping @Sendable (PromptKeyboard.Action) -> Void,
        onLost: @escaping @Sendable () -> Void
    ) -> TerminalPrompt? {
        guard let fd = descriptors.duplicateTerminal() else { return nil }
        var logger = session.logger
        logger[metadataKey: "uid"] = "\(session.uid)"
        return TerminalPrompt(fd: fd, logger: logger, onAction: onAction, onLost: onLost)
    }

    /// A non-blocking open file description of `handed`'s terminal that only the daemon holds, in
    /// place of `handed` (closed); else `handed`, made non-blocking. Only a terminal's own node is
    /// opened again (its st_rdev is the terminal: not /dev/tty, /dev/console or /dev/tty0, which
    /// open another terminal, or the opener's own), through the descriptor itself
    /// (/proc/self/fd: the same file, in whatever devpts it lives), and checked to be that file.
    static func ownDescription(of handed: Int32) -> Int32 {
        let device = la_terminal_device(handed)
        var theirs = stat()
        if device != 0, fstat(handed, &theirs) == 0, UInt64(theirs.st_rdev) == UInt64(device) {
            let own = open("/proc/self/fd/\(handed)", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
            var ours = stat()
            if own >= 0, fstat(own, &ours) == 0, ours.st_dev == theirs.st_dev, ours.st_ino == theirs.st_ino,
                la_terminal_device(own) == device
            {
                Glibc.close(handed)
                return own
            }
            if own >= 0 { Glibc.close(own) }
        }
        _ = fcntl(handed, F_SETFL, fcntl(handed, F_GETFL) | O_NONBLOCK)
        return handed
    }

    /// The evaluation's `EvaluationRunner.show`: draws the screen; the first one starts raw mode
    /// and the key reader, so a request that needs no prompt leaves the terminal alone.
    func show(_ s: PromptScreen) {
        writer.async { [self] in
            let first = keys.withLock { keys -> Bool? in
                guard !keys.closed else { return nil }
                defer {
                    keys.screen = s
                    keys.started = true
                }
                return !keys.started
            }
            guard let first else { return }
            if first && !startReading() {
                // No reader (out of descriptors): nothing to restore, and the evaluation hears it at once.
                keys.withLock {
                    $0.started = false
                    $0.closed = true
                }
                return onLost()
            }
            write(PromptText.lines(s, first: first).joined(separator: "\r\n") + "\r\n")
        }
    }

    /// How long one text (a screen, a line) may take to reach the terminal before the rest of it
    /// is dropped.
    static let writeTimeout: Double = 0.5

    /// Ends the prompt: stops the reader, restores the terminal, writes the outcome, after what was
    /// queued before (on the prompt's writer: the caller's thread never waits on a terminal, and
    /// each write the writer makes ends within `writeTimeout`).
    func close(result: String) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let queued = writer.finish { [self] in
                defer { done.resume() }
                let wasStarted = keys.withLock { keys -> Bool in
                    defer { keys.closed = true }
                    return keys.started
                }
                if wasStarted {
                    var one: UInt8 = 1
                    _ = Glibc.write(stopPipe[1], &one, 1)
                    reader?.join()
                    tcsetattr(fd, TCSANOW, &saved)
                    write(PromptText.closing(result) + "\r\n")
                    Glibc.close(stopPipe[0])
                    Glibc.close(stopPipe[1])
                }
                keys.withLock { $0.keyboard.clear() }
                Glibc.close(fd)
            }
            // Closed before: nothing more to do.
            if !queued { done.resume() }
        }
    }

    private func startReading() -> Bool {
        guard la_pipe_cloexec_nonblocking(&stopPipe) == 0 else { return false }
        tcgetattr(fd, &saved)
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        tcsetattr(fd, TCSANOW, &raw)
        reader = LoopThread(name: "laenclaved.prompt-keys") { [self] in readKeys() }
        return true
    }

    private func readKeys() {
        var fds = [
            pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0),
        ]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            guard poll(&fds, 2, -1) >= 0 || errno == EINTR else { return onLost() }
            if fds[1].revents != 0 { return }
            guard fds[0].revents != 0 else { continue }
            var byte: UInt8 = 0
            let n = Glibc.read(fd, &byte, 1)
            if n < 0 && (errno == EAGAIN || errno == EINTR) { continue }
            // End of file, EIO or a hang-up: the terminal is gone (its window closed, ssh dropped).
            guard n == 1 else { return onLost() }
            let action = keys.withLock { $0.keyboard.key(byte, on: $0.screen) }
            switch action {
            case .escape?:
                if !drainEscapeSequence() { onAction(.cancel) }
            case .passcode?:
                writer.async { [self] in write(PromptText.checking + "\r\n") }
                onAction(action!)
            case let other?:
                onAction(other)
            case nil:
                break
            }
        }
    }

    /// Arrow keys and the like arrive as ESC [ …: swallowed rather than read as cancel.
    private func drainEscapeSequence() -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 30) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 16)
        _ = Glibc.read(fd, &buffer, buffer.count)
        return true
    }

    /// Writes `text` within `writeTimeout`, on `writer`'s thread: a terminal that takes no more
    /// (output stopped, not read) is waited for in `poll`; a write blocked on a description a
    /// client made blocking again is interrupted (`SystemCallDeadline`).
    private func write(_ text: String) {
        let bytes = Array(text.utf8)
        let written = SystemCallDeadline.run(within: Self.writeTimeout) { left -> Bool in
            var offset = 0
            while offset < bytes.count {
                guard left() > 0 else { return false }
                let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    offset += n
                    continue
                }
                // End of file, EIO or a hang-up: the terminal is gone, and the reader says so.
                guard n < 0, errno == EAGAIN || errno == EINTR else { return true }
                if errno == EAGAIN {
                    var room = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&room, 1, Int32(max(1, (left() * 1000).rounded(.up))))
                }
            }
            return true
        }
        if !written && !cutShort {
            cutShort = true
            logger.notice(
                "a terminal prompt's write did not finish within \(Self.writeTimeout) s (a terminal that takes no more output, or a client that keeps the terminal it shares with the daemon blocking): what was left of it is dropped"
            )
        }
    }
}
