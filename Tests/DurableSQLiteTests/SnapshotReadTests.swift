import DurableSQLite
import Foundation
import GRDB
import XCTest

/// `readSnapshot`: one snapshot for every statement of a read, and a reader handed back out of
/// its transaction whatever the read did.
final class SnapshotReadTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "snapshot-read-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func pool(readers: Int = 1) throws -> DatabasePool {
        var configuration = Configuration()
        configuration.maximumReaderCount = readers
        let pool = try DurablePool.open(
            path: directory + "/store.sqlite",
            configuration: configuration,
            keeping: "test rows"
        )
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE t (n INTEGER)")
            try db.execute(sql: "INSERT INTO t VALUES (1)")
        }
        return pool
    }

    /// A commit made between two statements of the read is seen by neither: both read the
    /// snapshot the first one began.
    func testEveryStatementOfTheReadSeesOneSnapshot() throws {
        let pool = try pool()
        // Another writer of the same file: the pool's own writer may not be entered from its read.
        let other = try DatabaseQueue(path: directory + "/store.sqlite")
        let (before, after) = try pool.readSnapshot { db in
            let before = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
            try other.write { db in try db.execute(sql: "INSERT INTO t VALUES (2)") }
            return (before, try Int.fetchOne(db, sql: "SELECT count(*) FROM t"))
        }
        XCTAssertEqual(before, 1)
        XCTAssertEqual(after, 1, "the second statement read the commit made after the first")
        XCTAssertEqual(try pool.readSnapshot { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }, 2)
        try other.close()
    }

    /// The one reader is handed back out of its transaction after a read that returned and after
    /// one that threw, so the next read sees what was committed meanwhile.
    func testTheReaderLeavesItsTransactionWhateverTheReadDid() throws {
        struct Stop: Error {}
        let pool = try pool(readers: 1)
        _ = try pool.readSnapshot { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }
        XCTAssertFalse(try pool.unsafeRead { db in db.isInsideTransaction })
        XCTAssertThrowsError(
            try pool.readSnapshot { db -> Int? in
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
                throw Stop()
            }
        ) { XCTAssert($0 is Stop) }
        XCTAssertFalse(try pool.unsafeRead { db in db.isInsideTransaction })
        // Thrown from inside a cursor's iteration, as a look-up reads its rows.
        XCTAssertThrowsError(
            try pool.readSnapshot { db -> [Int] in
                try Array(Int.fetchCursor(db.cachedStatement(sql: "SELECT n FROM t")).map { _ in throw Stop() })
            }
        ) { XCTAssert($0 is Stop) }
        XCTAssertFalse(try pool.unsafeRead { db in db.isInsideTransaction })
        try pool.write { db in try db.execute(sql: "INSERT INTO t VALUES (2)") }
        XCTAssertEqual(try pool.readSnapshot { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }, 2)
    }

    /// A schema change between two reads: the reader's kept statements are made again.
    func testAReadAfterASchemaChangeBeginsAgain() throws {
        let pool = try pool(readers: 1)
        XCTAssertEqual(try pool.readSnapshot { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }, 1)
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE u (m INTEGER)")
            try db.execute(sql: "INSERT INTO u VALUES (7)")
        }
        XCTAssertEqual(try pool.readSnapshot { db in try Int.fetchOne(db, sql: "SELECT m FROM u") }, 7)
        XCTAssertFalse(try pool.unsafeRead { db in db.isInsideTransaction })
    }
}
