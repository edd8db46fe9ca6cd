import CPeerSocket
import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What a connection's client handed over: its terminal (where its prompts are drawn) and a
/// secret input (a pipe its administration's secrets are read from). Set by the handoff socket,
/// closed with the connection; a descriptor that arrives after the close is not taken.
final class HandedDescriptors: Sendable {
    private struct Held {
        var terminal: Int32?
        var secretLines: SecretLines?
        var closed = false
    }
    private let held = Mutex(Held())

    /// Takes ownership of `fd`; false when the connection has ended (the caller keeps it). A second
    /// handoff of a kind replaces the first: a prompt drawing on the old terminal holds its own
    /// duplicate, and a read of the old secret input in progress keeps its `SecretLines` (which
    /// owns its descriptor) until the read ends.
    func receive(_ kind: HandedDescriptor, _ fd: Int32) -> Bool {
        let (taken, previous): (Bool, Int32?) = held.withLock { held in
            guard !held.closed else { return (false, nil) }
            switch kind {
            case .terminal:
                defer { held.terminal = fd }
                return (true, held.terminal)
            case .secretInput:
                held.secretLines = SecretLines(owning: fd)
                return (true, nil)
            }
        }
        guard taken else { return false }
        if let previous { Self.closeTerminal(previous) }
        return true
    }

    /// Closes a terminal's descriptor on a thread of its own, after restoring the settings given:
    /// the last close of a terminal waits in the kernel for the terminal's lock and, for a serial
    /// line, for its output to drain (up to 30 s by default), and must hold no event loop.
    static func closeTerminal(_ fd: Int32, restoring settings: termios? = nil) {
        _ = LoopThread(name: "la-close-tty") {
            if var settings { tcsetattr(fd, TCSANOW, &settings) }
            Glibc.close(fd)
        }
    }

    /// A duplicate of the terminal for one prompt (the prompt closes it), or nil when none was handed.
    func duplicateTerminal() -> Int32? {
        held.withLock { held in
            guard let terminal = held.terminal else { return nil }
            let copy = fcntl(terminal, F_DUPFD_CLOEXEC, 3)
            return copy >= 0 ? copy : nil
        }
    }

    var hasTerminal: Bool { held.withLock { $0.terminal != nil } }

    /// The handed terminal as the kernel numbers it (TIOCGDEV), and whether it lives on the
    /// daemon's own `/dev/pts` (a pseudo-terminal of the machine's, not of an app's own devpts
    /// instance): told by the descriptor's inode, so only a slave opened by its own name
    /// (`/dev/pts/N`, as the client library hands it) can show it — one opened through /dev/tty
    /// is /dev/tty's inode, and does not; nil when none was handed.
    var terminal: (device: TerminalDevice, onTheMachinesPseudoTerminals: Bool)? {
        held.withLock { held in
            guard let fd = held.terminal, let device = TerminalDevice(ttyNr: Int64(la_terminal_device(fd))) else {
                return nil
            }
            var mine = stat()
            var machines = stat()
            let same = fstat(fd, &mine) == 0 && stat("/dev/pts", &machines) == 0 && mine.st_dev == machines.st_dev
            return (device, same)
        }
    }

    /// The lines of the handed secret input, or nil when none was handed.
    var secretInput: SecretLines? { held.withLock { $0.secretLines } }

    func close() {
        let fd: Int32? = held.withLock { held in
            held.closed = true
            defer {
                held.terminal = nil
                held.secretLines = nil
            }
            return held.terminal
        }
        if let fd { Self.closeTerminal(fd) }
    }
}
