import Crypto
import EnclaveCore
import Foundation
import GRDB
import XCTest

@testable import EnclaveServer

/// The state's side of the rollback counter: the anchor seals every user's record at a
/// generation, and breaks when a record, the generation or the index is not the one sealed.
final class StorageRollbackAnchorTests: XCTestCase {
    private var directory: String!

    override func setUp() { directory = NSTemporaryDirectory() + "anchor-\(UUID().uuidString)" }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    func testTheAnchorSealsEveryRecordAtItsGeneration() throws {
        let storage = try Storage(directory: directory)
        let key = Storage.anchorKey(master: SymmetricKey(size: .bits256))
        var alice = UserRecord(uid: 1000, domainSecret: Data(count: 32))
        let bob = UserRecord(uid: 1001, domainSecret: Data(count: 32))
        try storage.transaction { db in
            try Storage.write(alice, audit: [], db)
            try Storage.write(bob, audit: [], db)
            try Storage.writeAnchor(db, key: key, index: 0x01A4_C123, generation: 41)
        }
        let before = try storage.pool.read { db in try Storage.readAnchor(db) }
        let anchor = try XCTUnwrap(before)
        XCTAssertEqual(anchor.generation, 41)
        XCTAssertTrue(try storage.pool.read { db in try Storage.anchorIsIntact(anchor, db, key: key) })

        // One record as an older copy had it (a ledger with fewer failures), the anchor kept.
        let stored = try storage.pool.read { db in
            try Data.fetchOne(db, sql: "SELECT ledger FROM user WHERE uid = 1000")
        }
        alice.ledger.recordPasscodeFailure(attempt: Data([1]), now: MonotonicStamp(bootID: "b", seconds: 1))
        try storage.transaction { db in
            try Storage.write(alice, audit: [], db)
            try Storage.writeAnchor(db, key: key, index: anchor.index, generation: 42)
        }
        let after = try XCTUnwrap(try storage.pool.read { db in try Storage.readAnchor(db) })
        XCTAssertTrue(try storage.pool.read { db in try Storage.anchorIsIntact(after, db, key: key) })
        try storage.transaction { db in
            try db.execute(sql: "UPDATE user SET ledger = ? WHERE uid = 1000", arguments: [stored])
        }
        XCTAssertFalse(
            try storage.pool.read { db in try Storage.anchorIsIntact(after, db, key: key) },
            "a record put back"
        )

        // The generation or the index edited, or another key.
        try storage.transaction { db in try Storage.write(alice, audit: [], db) }
        XCTAssertTrue(try storage.pool.read { db in try Storage.anchorIsIntact(after, db, key: key) })
        for forged in [
            RollbackAnchor(index: after.index, generation: 43, seal: after.seal),
            RollbackAnchor(index: after.index + 1, generation: 42, seal: after.seal),
        ] {
            XCTAssertFalse(try storage.pool.read { db in try Storage.anchorIsIntact(forged, db, key: key) })
        }
        let otherKey = Storage.anchorKey(master: SymmetricKey(size: .bits256))
        XCTAssertFalse(try storage.pool.read { db in try Storage.anchorIsIntact(after, db, key: otherKey) })
    }
}
