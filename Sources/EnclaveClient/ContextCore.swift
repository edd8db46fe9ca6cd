import EnclaveProtocol
import Foundation
import Synchronization

/// The part of a context that a running evaluation holds on to, so that releasing the
/// `LAContext` can cancel it.
package final class ContextCore: Sendable {
    package let id = UUID().uuidString
    package let endpoint: EnclaveEndpoint
    private let state = Mutex(State())
    /// Where an evaluation's reply block runs (a private serial queue, as Apple's).
    package let replyQueue = DispatchQueue(label: "LocalAuthentication.LAContext.reply")

    private struct Running {
        /// Nil for a blocking request, which takes its reply itself.
        var finish: (@Sendable (Result<Reply, EnclaveClientError>) -> Void)?
    }

    private struct State {
        var invalidated = false
        var bound: EnclaveConnection?
        var running: Running?
    }

    package init(endpoint: EnclaveEndpoint) { self.endpoint = endpoint }

    package var isInvalidated: Bool { state.withLock { $0.invalidated } }

    /// The connection this context lives on. A context never moves to a new connection: its
    /// daemon-side state (authorization) went away with the old one.
    package func connection() throws -> EnclaveConnection {
        if let c = state.withLock({ $0.bound }) {
            guard !c.closed else { throw EnclaveClientError.connectionLost }
            return c
        }
        let c = try EnclaveConnections.shared(for: endpoint)
        return state.withLock {
            if $0.bound == nil { $0.bound = c }
            return $0.bound!
        }
    }

    package enum StartProblem: Error {
        case invalidated, busy
        case unreachable(String)
    }

    /// Sends a request that may open a prompt on this context (an evaluation or a keychain call),
    /// and calls `finish` once with the final reply. When the process runs in the foreground of a
    /// terminal, the daemon draws the prompt there and reads the person's keys itself
    /// (`presentingOnTerminal`); this process never sees them.
    package func runPrompted(
        presentable: Bool,
        request: @escaping @Sendable (_ onTerminal: Bool) -> Request,
        finish: @escaping @Sendable (Result<Reply, EnclaveClientError>) -> Void
    ) throws(StartProblem) {
        let connection = try begin(Running(finish: finish))
        let send: @Sendable (Bool) -> Void = { [weak self] onTerminal in
            connection.send(
                request(onTerminal),
                completion: { [weak self] result in
                    // One strong look at self: the caller may release its context as soon as it is answered.
                    if let core = self { core.complete(result) } else { finish(result) }
                }
            )
        }
        if presentable && !endpoint.headless { connection.presentingOnTerminal(send) } else { send(false) }
    }

    /// `runPrompted` for the synchronous API (SecItem…, key operations): the calling thread sends
    /// and reads its own reply (`EnclaveConnection.request`), with no thread woken to hand it over.
    /// Waits for a terminal handoff first when the prompt may be drawn on this process's terminal.
    package func runPromptedBlocking(
        presentable: Bool,
        request: (_ onTerminal: Bool) -> Request
    ) throws(StartProblem) -> Result<Reply, EnclaveClientError> {
        let connection = try begin(Running(finish: nil))
        defer { state.withLock { $0.running = nil } }
        var onTerminal = false
        if presentable && !endpoint.headless {
            let decided = DispatchSemaphore(value: 0)
            let handed = HandedResult<Bool>()
            connection.presentingOnTerminal { value in
                handed.set(value)
                decided.signal()
            }
            decided.wait()
            onTerminal = handed.current ?? false
        }
        do {
            return .success(try connection.request(request(onTerminal)))
        } catch let e as EnclaveClientError {
            return .failure(e)
        } catch {
            return .failure(.protocolError("\(error)"))
        }
    }

    /// Marks a request running on this context (one at a time) and answers its connection.
    private func begin(_ entry: Running) throws(StartProblem) -> EnclaveConnection {
        if isInvalidated { throw .invalidated }
        let connection: EnclaveConnection
        do { connection = try self.connection() } catch { throw .unreachable("\(error)") }
        let started: Bool = state.withLock {
            guard !$0.invalidated, $0.running == nil else { return false }
            $0.running = entry
            return true
        }
        guard started else { throw isInvalidated ? .invalidated : .busy }
        return connection
    }

    private func complete(_ result: Result<Reply, EnclaveClientError>) {
        guard
            let r = state.withLock({ s -> Running? in
                defer { s.running = nil }
                return s.running
            })
        else { return }
        r.finish?(result)
    }

    package func invalidate() {
        let (connection, wasInvalid) = state.withLock { s -> (EnclaveConnection?, Bool) in
            defer { s.invalidated = true }
            return (s.bound, s.invalidated)
        }
        guard !wasInvalid else { return }
        // The daemon ends a running evaluation with appCancel and forgets the authorization.
        // Nobody waits for the answer: no thread is woken to read it (the next reader drops it).
        connection?.sendDiscardingReply(.invalidate(.init(context: id)))
    }
}
