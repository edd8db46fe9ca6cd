import Foundation
import GRDB
@testable import TouchLoginServer
import XCTest

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
    }
}
