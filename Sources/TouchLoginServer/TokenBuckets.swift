/// Token buckets, one per key: each holds up to `capacity` tokens and gains `refillPerSecond`;
/// an event takes one. A pure value: the caller gives the time and keeps it behind a lock.
/// Memory is bounded: past `maxKeys`, buckets that have refilled completely (which say nothing
/// a fresh bucket would not) are dropped, then the fullest — so a flood of new keys cannot push
/// out the bucket of the address that emptied it.
public struct TokenBuckets: Sendable {
    public struct Rule: Sendable, Equatable {
        public var capacity: Double
        public var refillPerSecond: Double
        public init(capacity: Double, refillPerSecond: Double) {
            self.capacity = capacity
            self.refillPerSecond = refillPerSecond
        }
        /// `count` events per minute, all of them at once if need be.
        public static func perMinute(_ count: Int) -> Rule {
            Rule(capacity: Double(count), refillPerSecond: Double(count) / 60)
        }
    }

    public enum Decision: Equatable, Sendable {
        case allowed
        /// Seconds until a token is back.
        case limited(retryAfter: Double)
    }

    struct Bucket {
        var tokens: Double
        var updatedAt: Double
    }

    public let rule: Rule
    public let maxKeys: Int
    private var buckets: [String: Bucket] = [:]

    public init(_ rule: Rule, maxKeys: Int = 100_000) {
        self.rule = rule
        self.maxKeys = maxKeys
    }

    public var count: Int { buckets.count }

    /// Takes a token for `key` if there is one.
    public mutating func take(_ key: String, at now: Double) -> Decision {
        var bucket = refilled(key, at: now)
        guard bucket.tokens >= 1 else {
            buckets[key] = bucket
            return decision(bucket)
        }
        bucket.tokens -= 1
        store(bucket, for: key, at: now)
        return .allowed
    }

    /// Whether `key` has a token, without taking it.
    public func check(_ key: String, at now: Double) -> Decision {
        decision(refilled(key, at: now))
    }

    private func decision(_ bucket: Bucket) -> Decision {
        bucket.tokens >= 1 ? .allowed : .limited(retryAfter: (1 - bucket.tokens) / rule.refillPerSecond)
    }

    private func refilled(_ key: String, at now: Double) -> Bucket {
        guard var bucket = buckets[key] else { return Bucket(tokens: rule.capacity, updatedAt: now) }
        bucket.tokens = min(rule.capacity, bucket.tokens + max(0, now - bucket.updatedAt) * rule.refillPerSecond)
        bucket.updatedAt = now
        return bucket
    }

    private mutating func store(_ bucket: Bucket, for key: String, at now: Double) {
        buckets[key] = bucket
        guard buckets.count > maxKeys else { return }
        let full = rule.capacity / rule.refillPerSecond
        buckets = buckets.filter { now - $0.value.updatedAt < full - $0.value.tokens / rule.refillPerSecond }
        if buckets.count > maxKeys {
            let emptiest = buckets.map { ($0.key, refilled($0.key, at: now)) }.sorted { $0.1.tokens < $1.1.tokens }
                .prefix(maxKeys * 3 / 4)
            buckets = Dictionary(uniqueKeysWithValues: emptiest.map { ($0.0, $0.1) })
        }
        buckets[key] = bucket
    }
}
