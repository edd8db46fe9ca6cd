import CPeerSocket
import EnclaveCore
import EnclaveProtocol
import Foundation
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
/// prompt's writer. When the daemon cannot open the terminal (a system daemon, running as its own
/// user, and a user's terminal; a handed /dev/tty, which opens the opener's own terminal; a
/// terminal its client made exclusive) it uses the client's, made non-blocking: such a client can
/// still block a write, which then holds a thread of the daemon's until the client lets it go,
/// but never the prompt's close (`closeTimeout`) nor the daemon's stop (docs/architecture.md).
///
/// Unchecked: a thin owner of the terminal's descriptor. `saved`, `stopPipe` and `reader` are set and read
/// only on `output` (the reader thread reads `stopPipe` after `startReading` set it there, before
/// it started); the rest is in `keys`.
final class TerminalPrompt: @unchecked Sendable {
    private let fd: Int32
    private let onAction: @Sendable (PromptKeyboard.Action) -> Void
    private let onLost: @Sendable () -> Void
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
    init(
        fd: Int32,
        onAction: @escaping @Sendable (PromptKeyboard.Action) -> Void,
        onLost: @escaping @Sendable () -> Void
    ) {
        self.fd = Self.ownDescription(of: fd)
        self.onAction = onAction
        self.onLost = onLost
    }

    /// A non-blocking open file description of `handed`'s terminal that only the daemon holds, in
    /// place of `handed` (closed); else `handed`, made non-blocking. Opened through the descriptor
    /// itself (/proc/self/fd), so it is the same terminal in whatever devpts it lives; checked to
    /// be the same file and the same terminal (a handed /dev/tty opens the opener's own terminal,
    /// or none).
    static func ownDescription(of handed: Int32) -> Int32 {
        let own = open("/proc/self/fd/\(handed)", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        var (theirs, ours) = (stat(), stat())
        if own >= 0, fstat(handed, &theirs) == 0, fstat(own, &ours) == 0, theirs.st_dev == ours.st_dev,
            theirs.st_ino == ours.st_ino, la_terminal_device(handed) == la_terminal_device(own),
            la_terminal_device(own) != 0
        {
            Glibc.close(handed)
            return own
        }
        if own >= 0 { Glibc.close(own) }
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
            let finished = FirstResume(done)
            let timer = Deadline(after: Self.closeTimeout) { finished.resume() }
            output.async { [self] in
                defer {
                    timer.cancel()
                    finished.resume()
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

/// A continuation resumed by whichever of its resumers comes first.
private final class FirstResume: Sendable {
    private let continuation: Mutex<CheckedContinuation<Void, Never>?>

    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = Mutex(continuation) }

    func resume() { continuation.withLock { $0.take() }?.resume() }
}
