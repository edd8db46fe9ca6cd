import Synchronization

/// Whether a client was shown a failure (a "Wrong passcode" screen) before its daemon was killed:
/// marked from the connection's event callback, read by the test.
public final class FailureWitness: Sendable {
    private let seen = Atomic(false)
    public init() {}
    public func mark() { seen.store(true, ordering: .relaxed) }
    public var value: Bool { seen.load(ordering: .relaxed) }
}
