import Foundation
import GRDB
import XCTest

@testable import TouchLoginServer

/// The embedded store's durability: what it promises the sign counters and the challenges.
final class SQLiteLoginStoreTests: XCTestCase {
    /// Attack (a replayed assertion after the power was cut): a sign counter that rolled back with
    /// the page cache would accept it again. SQLite syncs each commit only with
    /// `synchronous = FULL` on the connection that writes — GRDB's pool sets NORMAL there when it
    /// turns on WAL, after the configuration's own statements ran (before: 1).
    func testTheWriterSyncsEveryCommit() async throws {
        let directory = NSTemporaryDirectory() + "login-store-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try SQLiteLoginStore(path: directory + "/login.sqlite")
        try await store.migrate()
        let mode = try await store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        XCTAssertEqual(mode, 2, "FULL: every commit synced before it returns")
        // Still after a batched write, and on a database opened again (its WAL already there).
        try await store.createAccount(
            Account(id: "durable", username: "durable", passwordHash: "scrypt$x", userHandle: Data([1]), createdAt: 1)
        )
        let found = try await store.account(id: "durable")
        XCTAssertNotNil(found)
        let afterWrite = try await store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        XCTAssertEqual(afterWrite, 2)
        let reopened = try SQLiteLoginStore(path: directory + "/login.sqlite")
        let onReopen = try await reopened.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        XCTAssertEqual(onReopen, 2)
    }

    /// The database, its WAL and the WAL's index hold the same rows: each is the owner's alone,
    /// whatever the process's umask (before: the WAL and index kept the umask's 0644).
    func testTheDatabaseFilesAreTheOwnersAlone() async throws {
        let directory = NSTemporaryDirectory() + "login-store-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/login.sqlite"
        let old = umask(0o022)
        defer { umask(old) }
        let store = try SQLiteLoginStore(path: path)
        try await store.migrate()
        for suffix in ["", "-wal", "-shm"] {
            let mode = try FileManager.default.attributesOfItem(atPath: path + suffix)[.posixPermissions] as? Int
            XCTAssertEqual(mode, 0o600, "login.sqlite\(suffix)")
        }
    }
}
