import Synchronization

/// A value one thread sets and another reads once signalled (a completion handed to a thread that
/// waits for it): the hand-over in a `Mutex`, so the compiler checks it. For our tools (`lactl`,
/// the agent, the benchmark), not part of Apple's API.
package final class HandedResult<Value: Sendable>: Sendable {
    private let value = Mutex<Value?>(nil)

    package init() {}

    package func set(_ newValue: Value) { value.withLock { $0 = newValue } }

    /// Keeps the first value set; later ones are dropped.
    package func setFirst(_ newValue: Value) { value.withLock { if $0 == nil { $0 = newValue } } }

    package var current: Value? { value.withLock { $0 } }
}
