import DurableSQLite
import Foundation
import GRDB
import XCTest

/// A durable pool: every commit synced (read back on the writing connection) and files no one
/// else can read, whatever the process's umask.
final class DurablePoolTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "durable-pool-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testEveryCommitIsSyncedAndTheFilesAreTheOwnersAlone() throws {
        let path = directory + "/store.sqlite"
        let previous = umask(0o022)
        defer { umask(previous) }
        let pool = try DurablePool.open(path: path, keeping: "test counters")
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE t (n INTEGER)")
            try db.execute(sql: "INSERT INTO t VALUES (1)")
        }
        let synchronous = try pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        XCTAssertEqual(synchronous, 2, "FULL on the connection that writes")
        // The last close removes the WAL and its index; SQLite makes them again, on the next open,
        // with the database file's mode (not the umask's), so they stay the owner's alone.
        try pool.close()
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-wal"))
        let reopened = try DatabasePool(path: path)
        try reopened.write { db in try db.execute(sql: "INSERT INTO t VALUES (2)") }
        var checked = 0
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            let mode = try XCTUnwrap(
                FileManager.default.attributesOfItem(atPath: path + suffix)[.posixPermissions] as? NSNumber
            ).uint16Value
            XCTAssertEqual(mode & 0o777, 0o600, "\(suffix.isEmpty ? "the database" : suffix) is the owner's alone")
            checked += 1
        }
        XCTAssertEqual(checked, 3)
    }
}
