import EnclaveCore
import EnclaveProtocol
@testable import EnclaveServer
import Foundation
import GRDB
import XCTest

/// Keychain writes that arrive together share a commit, each is durable before it returns, and
/// one that fails fails alone.
final class GroupCommitTests: XCTestCase {
    private var directory: String!

    override func setUp() {
        directory = NSTemporaryDirectory() + "group-commit-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func item(_ account: String, uid: UInt32 = 1000) -> StoredItem {
        StoredItem(uid: uid, accessGroup: "/usr/bin/app", itemClass: "genp", attributes: ["acct": .string(account)],
                   protection: .whenUnlocked, flags: [], enrolmentGeneration: 0,
                   sealed: ItemSealing.Sealed(wrappedKey: Data([1]), ciphertext: Data([2]), passwordSalt: nil),
                   persistentRef: Data(account.utf8), created: Date(), modified: Date())
    }

    private func itemCount(_ storage: Storage) throws -> Int {
        try storage.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") ?? -1 }
    }

    func testWritesThatArriveTogetherShareCommitsAndAreAllDurable() async throws {
        let storage = try Storage(directory: directory)
        let writes = 300
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<writes {
                group.addTask {
                    _ = try await storage.insertItem(Self.item("user\(i)"))
                    // Returned means committed: a reader outside the writer's transaction sees it.
                    let seen = try await storage.pool.read { db in
                        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item WHERE account = ?", arguments: ["user\(i)"])
                    }
                    XCTAssertEqual(seen, 1)
                }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(try itemCount(storage), writes)
        let commits = storage.itemWrites.commits
        // One commit per write without the gathering (checked by setting batchLimit to 1).
        XCTAssertLessThan(commits, writes / 2, "\(commits) commits for \(writes) concurrent writes")
        // Durable: a new process's view (a fresh Storage on the same files) has them all.
        let reopened = try Storage(directory: directory)
        XCTAssertEqual(try itemCount(reopened), writes)
    }

    func testAWriteThatFailsFailsAloneInItsCommit() async throws {
        let storage = try Storage(directory: directory)
        _ = try await storage.insertItem(Self.item("taken"))
        let outcomes = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            for name in ["a", "taken", "b", "c", "taken", "d"] {
                group.addTask {
                    do {
                        _ = try await storage.insertItem(Self.item(name))
                        return (name, true)
                    } catch KeychainStoreError.duplicate {
                        return (name, false)
                    }
                }
            }
            return try await group.reduce(into: [(String, Bool)]()) { $0.append($1) }
        }
        XCTAssertEqual(outcomes.filter { !$0.1 }.map(\.0), ["taken", "taken"])
        XCTAssertEqual(Set(outcomes.filter(\.1).map(\.0)), ["a", "b", "c", "d"])
        XCTAssertEqual(try itemCount(storage), 5)
    }

    func testAQuotaIsCountedAcrossTheWritesOfOneCommit() async throws {
        let storage = try Storage(directory: directory, quota: KeychainQuota(items: 10, bytes: 1 << 20))
        let accepted = try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<40 {
                group.addTask {
                    do {
                        _ = try await storage.insertItem(Self.item("user\(i)"))
                        return true
                    } catch KeychainStoreError.quotaExceeded {
                        return false
                    }
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        XCTAssertEqual(accepted, 10)
        XCTAssertEqual(try itemCount(storage), 10)
    }
}
