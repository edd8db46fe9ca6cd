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
/// screens and reads the person's keys (raw mode, echo off) on a thread of its own, and what the
/// person does goes straight into the evaluation. The app's process never sees a key.
///
/// The daemon draws on an open file description of the terminal of its own, non-blocking: a
/// stopped or flooded terminal does not block the daemon (a screen that cannot be written whole
/// is cut short, never waited for). Not the one the client handed: `O_NONBLOCK` belongs to the
/// open file description, and a client that cleared it on the copy it kept could block the
/// prompt's writer. When the daemon cannot open the terminal (always for the packaged system
/// daemon: its own user, no devices; a handed /dev/tty; a terminal of another user, or one its
/// client made unreadable or exclusive) it uses the client's, made non-blocking: such a client can
/// still block a write, which then holds a thread of the daemon's (and the prompt's descriptors and
/// key reader) until the client lets it go, but never the prompt's close for more than
/// `closeTimeout`, nor the daemon's stop; and while it does, the user's prompts are not drawn on
/// a handed terminal (`UserSession.heldTerminalPrompts`), so it holds one (docs/architecture.md).
///
/// Unchecked: a thin owner of the terminal's descriptor. `saved`, `stopPipe` and `reader` are set and read
/// only on `output` (the reader thread reads `stopPipe` after `startReading` set it there, before
/// it started); the rest is in `keys`.
final class TerminalPrompt: @unchecked Sendable {
    private let fd: Int32
    private let onAction: @Sendable (PromptKeyboard.Action) -> Void
    private let onLost: @Sendable () -> Void
    /// Told `true` when `close` gave up on the queue (a write is blocked), `false` when that write
    /// returned and the close was done after all.
    private let onHeld: @Sendable (Bool) -> Void
    /// Screens and the closing line in the order they were made.
    private let output = DispatchQueue(label: "laenclaved.terminal-prompt")
    private struct Keys {
        var keyboard = PromptKeyboard()
        var screen: PromptScreen?
        var started = false
        var closed = false
    }
    private let keys = Mutex(Keys())
    private var saved = termios()
    private var stopPipe: [Int32] = [-1, -1]
    /// The key reader, once started (set and read only on `output`, as `stopPipe`).
    private var reader: LoopThread?

    /// Takes ownership of `fd`.
    private init(
        fd: Int32,
        onAction: @escaping @Sendable (PromptKeyboard.Action) -> Void,
        onLost: @escaping @Sendable () -> Void,
        onHeld: @escaping @Sendable (Bool) -> Void
    ) {
        self.fd = Self.ownDescription(of: fd)
        self.onAction = onAction
        self.onLost = onLost
        self.onHeld = onHeld
    }

    /// A prompt of `session`'s on the terminal in `descriptors`, or nil: none was handed, or one of
    /// the user's prompts is held by a blocked write (`UserSession.heldTerminalPrompts`, which this
    /// one counts itself in when it is held).
    static func on(
        _ descriptors: HandedDescriptors,
        for session: UserSession,
        onAction: @escaping @Sendable (PromptKeyboard.Action) -> Void,
        onLost: @escaping @Sendable () -> Void
    ) -> TerminalPrompt? {
        guard session.heldTerminalPrompts.load(ordering: .acquiring) <= 0, let fd = descriptors.duplicateTerminal()
        else { return nil }
        return TerminalPrompt(fd: fd, onAction: onAction, onLost: onLost, onHeld: counting(in: session))
    }

    /// The `onHeld` of a prompt of `session`: counts it in `heldTerminalPrompts`, and logs when it
    /// is held.
    private static func counting(in session: UserSession) -> @Sendable (Bool) -> Void {
        { held in
            session.heldTerminalPrompts.add(held ? 1 : -1, ordering: .releasing)
            guard held else { return }
            session.logger.notice(
                "a terminal prompt's write did not return within \(Int(closeTimeout)) s (a client that keeps blocking the terminal it shares with the daemon can hold it): this user's prompts are not drawn on a handed terminal until it returns",
                metadata: ["uid": "\(session.uid)"]
            )
        }
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
        output.async { [self] in
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

    /// How long `close` waits for the prompt's queue.
    static let closeTimeout: Double = 2

    /// Ends the prompt: stops the reader, restores the terminal, writes the outcome (on the
    /// prompt's own queue: the caller's thread never waits on a terminal). The queue may be held
    /// by a write a client blocked (a handed description it shares, `ownDescription`): the caller
    /// waits for it at most `closeTimeout`, and the rest happens when that write returns.
    func close(result: String) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let wait = CloseWait(done)
            let onHeld = self.onHeld
            let timer = Deadline(after: Self.closeTimeout) { if wait.giveUp() { onHeld(true) } }
            output.async { [self] in
                defer {
                    timer.cancel()
                    if wait.finish() { onHeld(false) }
                }
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
                write(PromptText.checking + "\r\n")
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

    private func write(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        var stalls = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                offset += n
                continue
            }
            guard n < 0, errno == EAGAIN || errno == EINTR, stalls < 20 else { return }
            stalls += 1
            usleep(5_000)
        }
    }
}

/// The caller of `close`, resumed by whichever comes first: the prompt's queue, or the deadline.
private final class CloseWait: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Void, Never>)
        case gaveUp
        case finished
    }
    private let state: Mutex<State>

    init(_ caller: CheckedContinuation<Void, Never>) { state = Mutex(.waiting(caller)) }

    /// The deadline passed: resumes the caller if the queue has not; true if so (the queue is held).
    func giveUp() -> Bool {
        let caller = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard case .waiting(let caller) = state else { return nil }
            state = .gaveUp
            return caller
        }
        caller?.resume()
        return caller != nil
    }

    /// The queue's work is done: resumes the caller if it still waits; true if it had given up.
    func finish() -> Bool {
        let (caller, gaveUp) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Bool) in
            defer { state = .finished }
            switch state {
            case .waiting(let caller): return (caller, false)
            case .gaveUp: return (nil, true)
            case .finished: return (nil, false)
            }
        }
        caller?.resume()
        return gaveUp
    }
}
