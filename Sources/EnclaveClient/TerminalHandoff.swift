import CPeerSocket
import EnclaveProtocol
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The process's controlling terminal, handed to the daemon so that the daemon draws the prompt
/// and reads the person's keys itself (as sudo does): the passcode never enters the app's process.
enum ControllingTerminal {
    /// A fresh descriptor of /dev/tty (its own open file description, which the daemon may make
    /// non-blocking without touching the app's), when this process runs in the terminal's
    /// foreground. nil with no terminal (daemons, CI, tests) or as a background job: the daemon
    /// must not take the keyboard from the job in front.
    static func openForeground() -> (descriptor: Int32, device: UInt64)? {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        // Its real device (st_rdev would be /dev/tty's own, the same for every terminal).
        let device = la_terminal_device(fd)
        guard isatty(fd) == 1, tcgetpgrp(fd) == getpgrp(), device != 0 else {
            close(fd)
            return nil
        }
        return (byItsOwnName(fd, device: device), UInt64(device))
    }

    /// A pseudo-terminal opened by its own name (/dev/pts/N) in place of /dev/tty, when that name
    /// is the same terminal: the daemon reads from the descriptor's inode which devpts it lives on
    /// (`TerminalHolders`; through /dev/tty it would see /dev/tty's inode). Else `fd` as it is.
    private static func byItsOwnName(_ fd: Int32, device: UInt32) -> Int32 {
        guard let index = TerminalDevice(ttyNr: Int64(device))?.pseudoTerminalIndex else { return fd }
        let named = open("/dev/pts/\(index)", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard named >= 0 else { return fd }
        // The same numbers in another devpts instance (a sandbox's own) would be another terminal:
        // only this process's controlling terminal answers its foreground group.
        guard la_terminal_device(named) == device, tcgetpgrp(named) == getpgrp() else {
            close(named)
            return fd
        }
        close(fd)
        return named
    }
}

extension EnclaveConnection {
    /// Sends `descriptor` with `ticket` on the daemon's handoff socket (`Handoff`) and reads the
    /// daemon's answer. Blocking (at most a few seconds): run it off the cooperative pool.
    func handOver(_ descriptor: Int32, ticket: Data) throws {
        let path = EnclavePaths.handoffSocket(for: socketPath)
        let socket: Int32
        do { socket = try Self.connectSocket(path) } catch { throw EnclaveClientError.handoffFailed("\(error)") }
        defer { Glibc.close(socket) }
        // The same daemon as the connection's, or no terminal goes anywhere.
        guard let daemon = PeerCredentials.of(socket: socket), trustedDaemons.contains(daemon.uid) else {
            throw EnclaveClientError.handoffFailed("the process at \(path) is not a trusted laenclaved")
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // The daemon says `ready` before it takes a descriptor, or why not (`busy`).
        var answer: UInt8 = 255
        guard recv(socket, &answer, 1, 0) == 1 else {
            throw EnclaveClientError.handoffFailed("the daemon did not answer the handoff")
        }
        if answer == Handoff.ready {
            let bytes = [UInt8](ticket)
            guard la_send_with_descriptor(socket, bytes, bytes.count, descriptor) == bytes.count else {
                throw EnclaveClientError.handoffFailed(
                    "could not send the handoff: \(String(cString: strerror(errno)))"
                )
            }
            guard recv(socket, &answer, 1, 0) == 1 else {
                throw EnclaveClientError.handoffFailed("the daemon did not answer the handoff")
            }
        }
        guard let status = HandoffStatus(rawValue: answer), status == .accepted else {
            throw EnclaveClientError.handoffFailed(
                HandoffStatus(rawValue: answer)?.description ?? "handoff status \(answer)"
            )
        }
    }

    /// Hands the daemon a pipe or file to read administration's secrets from, one per line (what a
    /// script's `--stdin` or the testing kit use instead of a terminal); a file's bytes go through
    /// a pipe (`SecretInputPipe`: at most 4096 of them). Blocking: for synchronous callers (lactl,
    /// the testing kit), never on the cooperative pool.
    public func handOverSecretInput(_ descriptor: Int32) throws {
        let handing = try SecretInputPipe.handing(descriptor)
        defer { if handing.owned { Glibc.close(handing.descriptor) } }
        let ticket: Data
        switch try request(.handoff(.init(kind: .secretInput))) {
        case .handoffTicket(let issued): ticket = issued
        case .failure(let failure): throw EnclaveClientError.handoffFailed(failure.message)
        default: throw EnclaveClientError.handoffFailed("the daemon gave no handoff ticket")
        }
        try handOver(handing.descriptor, ticket: ticket)
    }

    /// Why this connection's last terminal handoff failed: the daemon's answer or the exchange's
    /// error (nil when none failed; a process with no foreground terminal tries none).
    public var terminalHandoffRefusal: String? { terminalHandoff.refusal }

    /// The blocking form of `presentingOnTerminal`, for synchronous callers: whether the daemon now
    /// holds this process's controlling terminal.
    public func handOverTerminal() -> Bool {
        let done = DispatchSemaphore(value: 0)
        let handed = HandedResult<Bool>()
        presentingOnTerminal { ok in
            handed.set(ok)
            done.signal()
        }
        done.wait()
        return handed.current ?? false
    }

    /// Calls `then(true)` once the daemon holds this process's controlling terminal (handed once
    /// per connection and terminal), or `then(false)` when the prompt must be headless: no
    /// terminal, a background job, or a failed handoff.
    public func presentingOnTerminal(_ then: @escaping @Sendable (Bool) -> Void) {
        guard let terminal = ControllingTerminal.openForeground() else { return then(false) }
        switch terminalHandoff.begin(device: terminal.device, waiter: then) {
        case .handed:
            Glibc.close(terminal.descriptor)
            then(true)
        case .refused:
            Glibc.close(terminal.descriptor)
            then(false)
        case .waiting:
            Glibc.close(terminal.descriptor)
        case .start:
            send(.handoff(.init(kind: .terminal))) { [self] result in
                // Off the reader thread: the exchange waits for the daemon's answer.
                DispatchQueue.global().async { [self] in
                    let refusal: String?
                    switch result {
                    case .success(.handoffTicket(let ticket)):
                        do {
                            try handOver(terminal.descriptor, ticket: ticket)
                            refusal = nil
                        } catch { refusal = "\(error)" }
                    case .success(.failure(let failure)): refusal = failure.message
                    case .success(let other): refusal = "the daemon answered \(other)"
                    case .failure(let error): refusal = "\(error)"
                    }
                    Glibc.close(terminal.descriptor)
                    for completion in terminalHandoff.finish(device: terminal.device, refusal: refusal) {
                        completion(refusal == nil)
                    }
                }
            }
        }
    }
}

/// Which terminal a connection has handed over (or failed to, and why: not tried again on that
/// connection, so a daemon without a handoff socket costs one attempt), and who waits while a
/// handoff runs.
final class TerminalHandoffState: Sendable {
    enum Begin { case handed, refused, waiting, start }

    private struct State {
        var handed: UInt64?
        var refused: UInt64?
        var refusal: String?
        var waiters: [@Sendable (Bool) -> Void]?
    }

    private let state = Mutex(State())

    func begin(device: UInt64, waiter: @escaping @Sendable (Bool) -> Void) -> Begin {
        state.withLock {
            if $0.handed == device { return .handed }
            if $0.refused == device { return .refused }
            if $0.waiters != nil {
                $0.waiters!.append(waiter)
                return .waiting
            }
            $0.waiters = [waiter]
            return .start
        }
    }

    /// The handoff of `device` ended: handed when `refusal` is nil. Its waiters, to be told.
    func finish(device: UInt64, refusal: String?) -> [@Sendable (Bool) -> Void] {
        state.withLock { s in
            if refusal == nil { s.handed = device } else { s.refused = device }
            s.refusal = refusal
            defer { s.waiters = nil }
            return s.waiters ?? []
        }
    }

    /// Why the last handoff failed (nil when it was handed, or none was tried).
    var refusal: String? { state.withLock { $0.refusal } }
}
