import Foundation

/// A fixed-window limit: at most `limit` events per `window` seconds for one key. The counts live
/// in the store, so every server instance sees the same ones.
public struct RateLimit: Sendable, Equatable {
    public var limit: Int
    public var window: Double

    public init(limit: Int, window: Double) { self.limit = limit; self.window = window }

    public func windowStart(at now: Double) -> Double { (now / window).rounded(.down) * window }

    /// Seconds until the window that `now` falls in ends.
    public func retryAfter(at now: Double) -> Int { max(1, Int((windowStart(at: now) + window - now).rounded(.up))) }

    public func exceeded(by count: Int) -> Bool { count > limit }
}

/// What the server limits, and how hard. Defaults: a client address may make 60 requests a minute
/// that create an account, start or finish a login (password or passkey, right or wrong; a passkey
/// login is two: options and answer); an account may see 5 failed attempts per 5 minutes, after
/// which even the right password waits for the window to end.
public struct RateLimits: Sendable, Equatable {
    public var perAddress = RateLimit(limit: 60, window: 60)
    public var failuresPerAccount = RateLimit(limit: 5, window: 300)
    public init() {}
}
