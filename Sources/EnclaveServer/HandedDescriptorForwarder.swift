import CPeerSocket
import EnclaveProtocol
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Carries a descriptor the handoff loop accepted out of the loop's own descriptor table
/// (`la_private_descriptor_table`) into the process's, and gives it to its connection: over a
/// socket pair, to a thread of the process's table (`la-handoff-in`), where receiving it
/// (SCM_RIGHTS) installs it.
///
/// Why the loop has a table of its own: a descriptor a client hands over may be a file whose
/// close never ends (FUSE, "Handing the terminal over" in docs/architecture.md), and no signal,
/// not even SIGKILL, ends that close. A thread stuck in it keeps its descriptor table, so in the
/// process's table it kept the daemon's own descriptors — the state directory's lock among them —
/// after the daemon was stopped or killed, and no daemon could start again on that state. Only
/// what the loop takes (a pipe, a terminal: their closes ask nobody) reaches the process's table.
///
/// Unchecked: a thin owner of the pair's descriptors. `loopEnd` is the loop's (closed in the
/// process's table once the loop has its own, `loopHasItsOwn`); the rest is touched by the thread
/// that forwards (the loop, one at a time) and the receiving thread, through the `Mutex`es.
final class HandedDescriptorForwarder: @unchecked Sendable {
    private let processEnd: Int32
    let loopEnd: Int32
    private var receiver: LoopThread?

    private struct Forwarding: Sendable {
        let kind: HandedDescriptor
        let destination: HandedDescriptors
    }
    private struct State {
        /// The forwarding under way (one at a time: the loop waits for its answer).
        var current: Forwarding?
        var taken = false
        /// The receiving thread has ended: nothing more is forwarded (the loop answers `busy`).
        var ended = false
    }
    private let state = Mutex(State())
    private let answered = DispatchSemaphore(value: 0)

    /// nil when there are no descriptors for the pair.
    init?() {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0
        else { return nil }
        processEnd = pair[0]
        loopEnd = pair[1]
        receiver = LoopThread(name: "la-handoff-in") { [self] in receive() }
    }

    /// The loop has its own table, holding `loopEnd`: the process's copy goes.
    func loopHasItsOwn() { Glibc.close(loopEnd) }

    enum Outcome { case taken, connectionEnded, notCarried }

    /// On the loop's thread: hands `fd` (still the loop's to close) to `destination`.
    func forward(_ kind: HandedDescriptor, _ fd: Int32, to destination: HandedDescriptors) -> Outcome {
        let going = state.withLock { state in
            guard !state.ended else { return false }
            state.current = Forwarding(kind: kind, destination: destination)
            return true
        }
        guard going else { return .notCarried }
        var byte: UInt8 = 1
        guard la_send_with_descriptor(loopEnd, &byte, 1, fd) == 1 else {
            state.withLock { $0.current = nil }
            return .notCarried
        }
        // Signalled once the receiver has given it to the connection, or has ended (`receive`).
        answered.wait()
        return state.withLock { $0.taken } ? .taken : .connectionEnded
    }

    /// Once the loop has closed `loopEnd` (in its own table): the receiving thread ends.
    func stop() {
        receiver?.join()
        receiver = nil
        Glibc.close(processEnd)
    }

    /// Until the loop closes its end (EOF). A message that brought no descriptor (the process's
    /// table full) is answered not taken; an error that is not the end is waited out, so that a
    /// forwarding is always answered.
    private func receive() {
        defer {
            // Whoever forwards from now on is told at once; one waiting now is woken.
            let waiting = state.withLock { state in
                state.ended = true
                state.taken = false
                return state.current != nil
            }
            if waiting { answered.signal() }
        }
        while true {
            var poller = pollfd(fd: processEnd, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, -1) < 0 {
                if errno != EINTR { usleep(10_000) }
                continue
            }
            var byte: UInt8 = 0
            var fds = [Int32](repeating: -1, count: 1)
            var count: Int32 = 0
            let n = la_receive_with_descriptors(processEnd, &byte, 1, &fds, 1, &count)
            if n == 0 { return }
            if n < 0 {
                if errno != EAGAIN && errno != EINTR { usleep(10_000) }
                continue
            }
            let forwarding = state.withLock { state in
                defer { state.current = nil }
                return state.current
            }
            var took = false
            if count == 1 {
                if let forwarding {
                    took = forwarding.destination.receive(forwarding.kind, fds[0])
                    // Not taken (its connection ended): a pipe's or a terminal's close, as the
                    // connection's own would be (`closeTerminal`: a serial line may drain).
                    if !took { dispose(fds[0], kind: forwarding.kind) }
                } else {
                    Glibc.close(fds[0])
                }
            }
            state.withLock { $0.taken = took }
            answered.signal()
        }
    }

    private func dispose(_ fd: Int32, kind: HandedDescriptor) {
        switch kind {
        case .terminal: HandedDescriptors.closeTerminal(fd)
        case .secretInput: Glibc.close(fd)
        }
    }
}
