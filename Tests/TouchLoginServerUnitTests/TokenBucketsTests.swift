import TouchLoginServer
import XCTest

final class TokenBucketsTests: XCTestCase {
    func testABurstThenOneTokenPerRefill() {
        var buckets = TokenBuckets(.init(capacity: 3, refillPerSecond: 0.5))
        XCTAssertEqual((0..<3).map { _ in buckets.take("a", at: 0) }, [.allowed, .allowed, .allowed])
        XCTAssertEqual(buckets.take("a", at: 0), .limited(retryAfter: 2))
        XCTAssertEqual(buckets.take("b", at: 0), .allowed, "each key has its own bucket")
        XCTAssertEqual(buckets.take("a", at: 1.5), .limited(retryAfter: 0.5))
        XCTAssertEqual(buckets.take("a", at: 2), .allowed)
        XCTAssertEqual(buckets.check("a", at: 100), .allowed)
        XCTAssertEqual(buckets.take("a", at: 100), .allowed)
        XCTAssertEqual(buckets.take("a", at: 100), .allowed)
        XCTAssertEqual(buckets.take("a", at: 100), .allowed)
        XCTAssertEqual(buckets.take("a", at: 100), .limited(retryAfter: 2), "never more than the capacity")
    }

    func testMemoryIsBoundedAndABusyBucketSurvivesAFlood() {
        var buckets = TokenBuckets(.init(capacity: 2, refillPerSecond: 1), maxKeys: 100)
        _ = buckets.take("busy", at: 0)
        _ = buckets.take("busy", at: 0)
        for i in 0..<1_000 { _ = buckets.take("flood-\(i)", at: 0.5) }
        XCTAssertLessThanOrEqual(buckets.count, 101)
        XCTAssertEqual(
            buckets.check("busy", at: 0.5),
            .limited(retryAfter: 0.5),
            "an empty bucket is not forgotten for newer full ones"
        )
    }
}
