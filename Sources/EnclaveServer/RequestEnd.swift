import Synchronization

/// The end of one request that runs on its own: its context invalidated, its connection closed.
/// A wait that may outlast it (its turn for the user's one prompt) reads it and ends at once; its
/// evaluation reads the same end from its inputs. The request's task is never cancelled for it:
/// Swift cancels no single child of a group, and a race of tasks to make one cost each request
/// two tasks and three wake-ups.
final class RequestEnd: Sendable {
    private struct State {
        var ended = false
        var waits: [UInt64: @Sendable () -> Void] = [:]
        var nextWait: UInt64 = 0
    }
    private let state = Mutex(State())

    init() {}

    /// Ends the request: every wait registered runs its `onEnd`, once.
    func end() {
        let waits = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.ended else { return [] }
            state.ended = true
            defer { state.waits.removeAll() }
            return Array(state.waits.values)
        }
        for onEnd in waits { onEnd() }
    }

    var hasEnded: Bool { state.withLock { $0.ended } }

    /// Registers `onEnd` for a wait; nil when the request has ended already (the caller must not
    /// wait). `forget` it when the wait is over.
    func whenEnded(_ onEnd: @escaping @Sendable () -> Void) -> UInt64? {
        state.withLock { state in
            guard !state.ended else { return nil }
            state.nextWait += 1
            state.waits[state.nextWait] = onEnd
            return state.nextWait
        }
    }

    func forget(_ wait: UInt64) {
        _ = state.withLock { $0.waits.removeValue(forKey: wait) }
    }
}
