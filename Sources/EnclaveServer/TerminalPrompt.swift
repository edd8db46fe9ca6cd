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
/// stopped or flooded terminal does not block the daemon. Not the one the client handed:
/// `O_NONBLOCK` belongs to the open file description, and a client that cleared it on the copy it
/// kept could block the prompt's writer or its key reader. When the daemon cannot open the
/// terminal (always for the packaged system daemon: its own user, no devices; a handed /dev/tty; a
/// terminal of another user, or one its client made unreadable or exclusive) it uses the
/// client's, made non-blocking, and the calls such a client can block are interrupted
/// (`SystemCallInterruption`): a write at its deadline (`writeTimeout`, and `writeBudget` for all
/// of a prompt's writes), the key reader's `poll` and `read` when the prompt closes. So a client
/// holds no thread of the daemon's for good, and the prompt's close waits for the terminal's
/// writes at most `writeBudget`. The terminal's own opening, settings and last close, which can
/// wait in the kernel (for the terminal's lock; a serial line's close for its output to drain),
/// happen on threads of the daemon's own, never on an event loop (docs/architecture.md).
///
/// Unchecked: a thin owner of the terminal's descriptor. `saved`, `rawMode`, `reader`,
/// `writeBudgetLeft` and `cutShort` are set and read only on `writer`'s thread (and in `deinit`,
/// when no other thread holds the prompt). `fd` is set there too, once, at the first screen
/// (the daemon's own description), before the key reader's thread starts and reads it; the rest
/// is in `keys`.
final class TerminalPrompt: @unchecked Sendable {
    private var fd: Int32
    private let onAction: @Sendable (PromptKeyboard.Action) -> Void
    private let onLost: @Sendable () -> Void
    private let logger: Logger
    /// Screens, the passcode's "checking" line and the closing line, in the order they were made.
    private let writer = SerialThread(name: "la-prompt-draw")
    private struct Keys {
        var keyboard = PromptKeyboard()
        var screen: PromptScreen?
        var started = false
        var closed = false
    }
    private let keys = Mutex(Keys())
    private var saved = termios()
    /// Raw mode was set (`saved` was read): the terminal is restored at the close.
    private var rawMode = false
    /// The key reader, once started (set and read only on `writer`'s thread).
    private var reader: LoopThread?
    /// Ends the key reader's waits when the prompt closes, wherever they are.
    private let keyInterruption = SystemCallInterruption()
    /// What is left of `writeBudget`.
    private var writeBudgetLeft = TerminalPrompt.writeBudget
    /// A write of this prompt's was cut short (logged once a prompt).
    private var cutShort = false

    /// Takes ownership of `fd`.
    private init(
        fd: Int32,
        logger: Logger,
        onAction: @escaping @Sendable (PromptKeyboard.Action) -> Void,
        onLost: @escaping @Sendable () -> Void
    ) {
        self.fd = fd
        self.logger = logger
        self.onAction = onAction
        self.onLost = onLost
    }

    /// A prompt dropped without `close`: the terminal as it was, the descriptor closed. Only once
    /// nothing else holds the prompt: queued jobs and the key reader hold it while they run (a
    /// prompt whose reader runs stays until it is closed, as every caller does).
    deinit {
        if !keys.withLock({ $0.closed }) { HandedDescriptors.closeTerminal(fd, restoring: rawMode ? saved : nil) }
        writer.finish()
    }

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
            if first {
                fd = Self.ownDescription(of: fd)
                // Its settings cannot be read: the terminal hung up before the first screen.
                guard startReading() else { return onLost() }
            }
            write(PromptText.lines(s, first: first).joined(separator: "\r\n") + "\r\n")
        }
    }

    /// How long one text (a screen, a line) may wait for the terminal before the rest of it is
    /// dropped.
    static let writeTimeout: Double = 0.5
    /// How long all of a prompt's writes together may wait for the terminal: past it nothing more
    /// is drawn, so however many texts are queued (a client typing passcodes behind a stopped
    /// terminal queues a "checking" line each), the prompt's close waits no longer.
    static let writeBudget: Double = 2

    /// Ends the prompt: stops the reader at once, then restores the terminal and writes the
    /// outcome after what was queued before (on the prompt's writer: the caller's thread never
    /// waits on a terminal, and the writer's writes to it end within `writeBudget`).
    func close(result: String) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            keyInterruption.interrupt()
            let queued = writer.finish { [self] in
                defer { done.resume() }
                let wasStarted = keys.withLock { keys -> Bool in
                    defer { keys.closed = true }
                    return keys.started
                }
                if rawMode {
                    reader?.join()
                    tcsetattr(fd, TCSANOW, &saved)
                }
                if wasStarted { write(PromptText.closing(result) + "\r\n") }
                keys.withLock { $0.keyboard.clear() }
                HandedDescriptors.closeTerminal(fd)
            }
            // Closed before: nothing more to do.
            if !queued { done.resume() }
        }
    }

    /// Raw mode and the key reader; false, and neither, when the terminal's settings cannot be
    /// read (a terminal hung up answers EIO; the handoff took only terminals).
    private func startReading() -> Bool {
        guard tcgetattr(fd, &saved) == 0 else { return false }
        rawMode = true
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        tcsetattr(fd, TCSANOW, &raw)
        reader = LoopThread(name: "la-prompt-keys") { [self] in readKeys() }
        return true
    }

    private enum KeyRead {
        case key(UInt8)
        /// The prompt closed.
        case stopped
        /// The terminal is gone.
        case lost
    }

    /// Takes the person's keys until the prompt closes; what they do is called outside the waits
    /// `keyInterruption` ends.
    private func readKeys() {
        while true {
            let byte: UInt8
            switch keyInterruption.run({ left in nextKey(left) }) {
            case .stopped: return
            case .lost: return onLost()
            case .key(let key): byte = key
            }
            let action = keys.withLock { $0.keyboard.key(byte, on: $0.screen) }
            switch action {
            case .escape?:
                if !keyInterruption.run({ left in drainEscapeSequence(left) }) { onAction(.cancel) }
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

    private func nextKey(_ left: () -> Double) -> KeyRead {
        var input = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while left() > 0 {
            input.revents = 0
            // A quarter second at a time: the close is seen even with no signal (none installed).
            guard poll(&input, 1, 250) >= 0 || errno == EINTR else { return .lost }
            guard input.revents != 0, left() > 0 else { continue }
            var byte: UInt8 = 0
            let n = Glibc.read(fd, &byte, 1)
            if n < 0 && (errno == EAGAIN || errno == EINTR) { continue }
            // End of file, EIO or a hang-up: the terminal is gone (its window closed, ssh dropped).
            guard n == 1 else { return .lost }
            return .key(byte)
        }
        return .stopped
    }

    /// Arrow keys and the like arrive as ESC [ …: swallowed rather than read as cancel (a prompt
    /// closing meanwhile swallows it too).
    private func drainEscapeSequence(_ left: () -> Double) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 30) > 0 else { return left() <= 0 }
        var buffer = [UInt8](repeating: 0, count: 16)
        _ = Glibc.read(fd, &buffer, buffer.count)
        return true
    }

    /// Writes `text` on `writer`'s thread, within `writeTimeout` and what is left of
    /// `writeBudget`: a terminal that takes no more (output stopped, not read) is waited for in
    /// `poll`; a write blocked on a description a client made blocking again is interrupted.
    private func write(_ text: String) {
        let allowed = min(Self.writeTimeout, writeBudgetLeft)
        guard allowed > 0 else { return }
        let bytes = Array(text.utf8)
        let start = DispatchTime.now().uptimeNanoseconds
        let written = SystemCallInterruption.run(within: allowed) { left -> Bool in
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
        writeBudgetLeft -= Double(DispatchTime.now().uptimeNanoseconds &- start) / 1e9
        if !written && !cutShort {
            cutShort = true
            logger.notice(
                "a terminal prompt's write did not finish within \(allowed) s (a terminal that takes no more output, or a client that keeps the terminal it shares with the daemon blocking): what was left of it is dropped, and once its writes have waited \(Self.writeBudget) s in all, nothing more of this prompt is drawn"
            )
        }
    }
}
