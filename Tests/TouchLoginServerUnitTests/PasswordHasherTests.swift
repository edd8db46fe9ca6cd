import TouchLoginServer
import XCTest

final class PasswordHasherTests: XCTestCase {
    func testVerifiesTheRightPasswordOnly() throws {
        let hasher = PasswordHasher(cost: 10)
        let stored = try hasher.hash("correct horse")
        XCTAssertTrue(stored.hasPrefix("scrypt$10$8$1$"))
        XCTAssertFalse(stored.contains("correct horse"))
        XCTAssertTrue(hasher.verify("correct horse", against: stored))
        XCTAssertFalse(hasher.verify("correct horsf", against: stored))
        XCTAssertNotEqual(try hasher.hash("correct horse"), stored, "a fresh salt each time")
    }

    func testAHashIsRemadeWhenItsCostIsBelowToday() throws {
        let today = PasswordHasher(cost: 11)
        XCTAssertTrue(today.needsRehash(try PasswordHasher(cost: 10).hash("pw")))
        XCTAssertFalse(today.needsRehash(try today.hash("pw")))
        XCTAssertFalse(today.needsRehash(try PasswordHasher(cost: 12).hash("pw")), "a costlier one is kept")
        XCTAssertTrue(today.needsRehash("not a hash"))
    }

    func testAnUnreadableOrWeakenedHashNeverMatches() throws {
        let hasher = PasswordHasher(cost: 10)
        let stored = try hasher.hash("correct horse")
        var parts = stored.split(separator: "$").map(String.init)
        XCTAssertFalse(hasher.verify("correct horse", against: ""))
        XCTAssertFalse(hasher.verify("correct horse", against: "plain$correct horse"))
        parts[1] = "4"  // below the minimum cost
        XCTAssertFalse(hasher.verify("correct horse", against: parts.joined(separator: "$")))
        parts[1] = "10"
        parts[5] = "AAAA"
        XCTAssertFalse(hasher.verify("correct horse", against: parts.joined(separator: "$")))
    }
}
