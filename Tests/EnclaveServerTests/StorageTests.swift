import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
import XCTest

@testable import EnclaveServer

/// What the database bounds by itself, for every user.
final class StorageTests: XCTestCase {
    private var directory: String!

    override func setUp() {
        directory = NSTemporaryDirectory() + "storage-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func count(_ storage: Storage, uid: UInt32) throws -> Int {
        try storage.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM audit WHERE uid = ?", arguments: [Int64(uid)]) ?? 0
        }
    }

    /// Attack: an app makes thousands of audited requests a second (4 KB paths included). Its
    /// user's log keeps the newest entries only; another user's entries stay.
    func testTheAuditLogKeepsEachUsersNewestEntries() throws {
        let storage = try Storage(directory: directory)
        let path = "/tmp/" + String(repeating: "p", count: 4000)
        try storage.appendAudit(
            (0..<5).map { _ in
                AuditEntry(
                    time: Date(),
                    uid: 2,
                    pid: 1,
                    app: "/usr/bin/quiet",
                    operation: "status",
                    policy: nil,
                    result: "ok"
                )
            }
        )
        let flood = Storage.auditRowsPerUser + 1_500
        for start in stride(from: 0, to: flood, by: 500) {
            try storage.appendAudit(
                (start..<min(start + 500, flood)).map {
                    AuditEntry(
                        time: Date(),
                        uid: 1,
                        pid: 1,
                        app: path,
                        operation: "entry \($0)",
                        policy: nil,
                        result: "ok"
                    )
                }
            )
        }
        let kept = try count(storage, uid: 1)
        XCTAssertLessThanOrEqual(kept, Storage.auditRowsPerUser + 256, "the flood's user keeps at most its share")
        XCTAssertGreaterThanOrEqual(kept, Storage.auditRowsPerUser)
        let newest = try storage.audit(uid: 1, app: nil, limit: 1)
        XCTAssertEqual(newest.first?.operation, "entry \(flood - 1)", "the newest entries are the ones kept")
        XCTAssertEqual(try count(storage, uid: 2), 5, "another user's entries stay")
    }

    /// Attack (a guess, then the power cut before the WAL reached the disk): a counter that guards
    /// against guessing must be on the disk before the answer leaves. SQLite syncs each commit
    /// only with `synchronous = FULL` on the connection that writes — GRDB's pool sets NORMAL
    /// there when it turns on WAL, after the configuration's own statements ran (before: 1).
    func testTheWriterSyncsEveryCommit() async throws {
        let storage = try Storage(directory: directory)
        let mode = try await storage.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        XCTAssertEqual(mode, 2, "FULL: every commit synced before it returns")
        let journal = try await storage.pool.write { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        XCTAssertEqual(journal, "wal")
        // Still after the write paths (a record, a batched add, a deletion and its checkpoint), and
        // on the database opened again with its WAL in place.
        try storage.save(UserRecord(uid: 1000, domainSecret: Data(count: 32)))
        let id = try await storage.insertItem(
            StoredItem(
                uid: 1000,
                accessGroup: "/usr/bin/app",
                itemClass: "genp",
                attributes: ["acct": .string("a")],
                protection: .whenUnlocked,
                flags: [],
                enrolmentGeneration: 0,
                sealed: ItemSealing.Sealed(wrappedKey: Data([1]), ciphertext: Data([2]), passwordSalt: nil),
                persistentRef: Data([3]),
                created: Date(),
                modified: Date()
            )
        )
        try storage.deleteItems(ids: [id], uid: 1000)
        let afterWrites = try await storage.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        XCTAssertEqual(afterWrites, 2)
        let reopened = try Storage(directory: directory)
        let onReopen = try await reopened.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        XCTAssertEqual(onReopen, 2)
    }

    /// An item's count of wrong application passwords is stored, read back, and goes with the item.
    func testPasswordAttemptsAreKeptPerItemAndGoWithIt() async throws {
        let storage = try Storage(directory: directory)
        func item(_ account: String) -> StoredItem {
            StoredItem(
                uid: 1000,
                accessGroup: "/usr/bin/app",
                itemClass: "genp",
                attributes: ["acct": .string(account)],
                protection: .whenUnlocked,
                flags: [.applicationPassword],
                enrolmentGeneration: 0,
                sealed: ItemSealing.Sealed(wrappedKey: Data([1]), ciphertext: Data([2]), passwordSalt: Data([3])),
                persistentRef: Data(account.utf8),
                created: Date(),
                modified: Date()
            )
        }
        let first = try await storage.insertItem(item("first"))
        let second = try await storage.insertItem(item("second"))
        var attempts = PasswordAttempts()
        for _ in 0..<5 { attempts.recordFailure(now: Date(timeIntervalSince1970: 1_000)) }
        try storage.setPasswordAttempts(attempts, item: first)
        XCTAssertEqual(try storage.applicationPasswordAttempts(item: first), attempts)
        XCTAssertEqual(try storage.applicationPasswordAttempts(item: second), PasswordAttempts(), "per item")
        try storage.deleteItems(ids: [first], uid: 1000)
        let left = try await storage.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item_password_attempts") ?? -1
        }
        XCTAssertEqual(left, 0, "the count went with its item")
        try storage.setPasswordAttempts(attempts, item: second)
        try storage.setPasswordAttempts(PasswordAttempts(), item: second)
        XCTAssertEqual(try storage.applicationPasswordAttempts(item: second), PasswordAttempts(), "a success clears it")
    }
}
