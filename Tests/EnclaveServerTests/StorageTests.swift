import EnclaveCore
import EnclaveProtocol
@testable import EnclaveServer
import Foundation
import GRDB
import XCTest

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
        try storage.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM audit WHERE uid = ?", arguments: [Int64(uid)]) ?? 0 }
    }

    /// Attack: an app makes thousands of audited requests a second (4 KB paths included). Its
    /// user's log keeps the newest entries only; another user's entries stay.
    func testTheAuditLogKeepsEachUsersNewestEntries() throws {
        let storage = try Storage(directory: directory)
        let path = "/tmp/" + String(repeating: "p", count: 4000)
        try storage.appendAudit((0..<5).map { _ in AuditEntry(time: Date(), uid: 2, pid: 1, app: "/usr/bin/quiet", operation: "status", policy: nil, result: "ok") })
        let flood = Storage.auditRowsPerUser + 1_500
        for start in stride(from: 0, to: flood, by: 500) {
            try storage.appendAudit((start..<min(start + 500, flood)).map {
                AuditEntry(time: Date(), uid: 1, pid: 1, app: path, operation: "entry \($0)", policy: nil, result: "ok")
            })
        }
        let kept = try count(storage, uid: 1)
        XCTAssertLessThanOrEqual(kept, Storage.auditRowsPerUser + 256, "the flood's user keeps at most its share")
        XCTAssertGreaterThanOrEqual(kept, Storage.auditRowsPerUser)
        let newest = try storage.audit(uid: 1, app: nil, limit: 1)
        XCTAssertEqual(newest.first?.operation, "entry \(flood - 1)", "the newest entries are the ones kept")
        XCTAssertEqual(try count(storage, uid: 2), 5, "another user's entries stay")
    }
}
