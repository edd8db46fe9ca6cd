import Synchronization

/// The per-address token buckets of one server instance (in memory: they only have to slow a
/// flood down, and a shared counter would cost a database write per request).
public final class AddressLimits: Sendable {
    private let requests: Mutex<TokenBuckets>
    private let passkeyFailures: Mutex<TokenBuckets>

    public init(_ limits: RateLimits) {
        requests = Mutex(TokenBuckets(limits.perAddress))
        passkeyFailures = Mutex(TokenBuckets(limits.passkeyFailuresPerAddress))
    }

    /// Takes a request token from the address's bucket.
    func admitRequest(from key: String, at now: Double) -> TokenBuckets.Decision {
        requests.withLock { $0.take(key, at: now) }
    }

    /// Whether a passkey may still be tried on this budget (`LoginService.passkeyBudgetKey`: an
    /// address and the credential it claims); refused assertions spend its tokens.
    func mayTryPasskey(_ key: String, at now: Double) -> TokenBuckets.Decision {
        passkeyFailures.withLock { $0.check(key, at: now) }
    }

    func passkeyFailed(_ key: String, at now: Double) {
        _ = passkeyFailures.withLock { $0.take(key, at: now) }
    }
}
