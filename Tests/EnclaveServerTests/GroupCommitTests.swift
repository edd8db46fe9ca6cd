import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
import XCTest

@testable import EnclaveServer

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
        StoredItem(
            uid: uid,
            accessGroup: "/usr/bin/app",
            itemClass: "genp",
            attributes: ["acct": .string(account)],
            protection: .whenUnlocked,
            flags: [],
            enrolmentGeneration: 0,
            sealed: ItemSealing.Sealed(wrappedKey: Data([1]), ciphertext: Data([2]), passwordSalt: nil),
            persistentRef: Data(account.utf8),
            created: Date(),
            modified: Date()
        )
    }

    private static func waitFor(_ writes: Int, in storage: Storage) async throws {
        let deadline = Date().addingTimeInterval(10)
        while storage.itemWrites.waitingWrites < writes && Date() < deadline {
            try await Task.sleep(nanoseconds: 1_000_000)
        }
        XCTAssertEqual(storage.itemWrites.waitingWrites, writes)
    }

    /// A hold taken right after a commit still holds the next one (the drain that just committed
    /// may still be running).
    func testAHoldTakenRightAfterACommitHoldsTheNext() async throws {
        let storage = try Storage(directory: directory)
        _ = try await storage.insertItem(Self.item("first"))
        let release = storage.itemWrites.hold()
        let second = Task { try await storage.insertItem(GroupCommitTests.item("second")) }
        try await Self.waitFor(1, in: storage)
        try await Task.sleep(nanoseconds: 50_000_000)
        XCTAssertEqual(try itemCount(storage), 1, "held")
        release()
        release()  // a second call changes nothing
        _ = try await second.value
        XCTAssertEqual(try itemCount(storage), 2)
    }

    private func itemCount(_ storage: Storage) throws -> Int {
        try storage.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") ?? -1 }
    }

    func testWritesThatArriveTogetherShareCommitsAndAreAllDurable() async throws {
        let storage = try Storage(directory: directory)
        let writes = 300
        // Held, so that every write is waiting before the first commit: then exactly ⌈300 / 256⌉.
        let release = storage.itemWrites.hold()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<writes {
                group.addTask {
                    _ = try await storage.insertItem(Self.item("user\(i)"))
                    // Returned means committed: a reader outside the writer's transaction sees it.
                    let seen = try await storage.pool.read { db in
                        try Int.fetchOne(
                            db,
                            sql: "SELECT COUNT(*) FROM item WHERE account = ?",
                            arguments: ["user\(i)"]
                        )
                    }
                    XCTAssertEqual(seen, 1)
                }
            }
            let deadline = Date().addingTimeInterval(10)
            while storage.itemWrites.waitingWrites < writes && Date() < deadline {
                try await Task.sleep(nanoseconds: 1_000_000)
            }
            XCTAssertEqual(try itemCount(storage), 0, "nothing is written before its commit")
            release()
            try await group.waitForAll()
        }
        XCTAssertEqual(try itemCount(storage), writes)
        // One commit per write without the gathering (checked by setting batchLimit to 1).
        XCTAssertEqual(
            storage.itemWrites.commits,
            (writes + storage.itemWrites.batchLimit - 1) / storage.itemWrites.batchLimit
        )
        // Durable: a new process's view (a fresh Storage on the same files) has them all.
        let reopened = try Storage(directory: directory)
        XCTAssertEqual(try itemCount(reopened), writes)
    }

    /// A write that wrote and then failed leaves nothing of itself (its savepoint rolls back), and
    /// the others of its commit stay.
    func testAWriteThatFailsAfterWritingLeavesNothingOfItself() async throws {
        let storage = try Storage(directory: directory)
        struct Refused: Error {}
        let release = storage.itemWrites.hold()
        async let first: Int64 = storage.insertItem(Self.item("kept-1"))
        async let failing: Void = storage.itemWrites.write { db in
            try db.execute(sql: "INSERT INTO access_group (uid, name, app) VALUES (1000, 'half', '/usr/bin/app')")
            throw Refused()
        }
        async let second: Int64 = storage.insertItem(Self.item("kept-2"))
        let deadline = Date().addingTimeInterval(10)
        while storage.itemWrites.waitingWrites < 3 && Date() < deadline { try await Task.sleep(nanoseconds: 1_000_000) }
        release()
        _ = try await (first, second)
        do {
            try await failing
            XCTFail("the failing write fails")
        } catch is Refused {}
        XCTAssertEqual(try itemCount(storage), 2)
        let groups = try await storage.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM access_group")
        }
        XCTAssertEqual(groups, 0, "its own row went with it")
        XCTAssertEqual(storage.itemWrites.commits, 1)
    }

    /// A write that ends the whole transaction (as an I/O error or a full disk does) fails every
    /// write of its commit: none is reported written, none is.
    func testAWriteThatEndsTheTransactionFailsItsWholeCommit() async throws {
        let storage = try Storage(directory: directory)
        let release = storage.itemWrites.hold()
        async let first: Int64 = storage.insertItem(Self.item("lost-1"))
        async let ending: Void = storage.itemWrites.write { db in
            try db.execute(sql: "ROLLBACK")
            throw DatabaseError(resultCode: .SQLITE_IOERR, message: "as the disk would")
        }
        async let second: Int64 = storage.insertItem(Self.item("lost-2"))
        let deadline = Date().addingTimeInterval(10)
        while storage.itemWrites.waitingWrites < 3 && Date() < deadline { try await Task.sleep(nanoseconds: 1_000_000) }
        release()
        var failures = 0
        do { _ = try await first } catch { failures += 1 }
        do { try await ending } catch { failures += 1 }
        do { _ = try await second } catch { failures += 1 }
        XCTAssertEqual(failures, 3)
        XCTAssertEqual(try itemCount(storage), 0)
        // The next commit works again.
        _ = try await storage.insertItem(Self.item("after"))
        XCTAssertEqual(try itemCount(storage), 1)
    }

    func testAWriteThatFailsFailsAloneInItsCommit() async throws {
        let storage = try Storage(directory: directory)
        _ = try await storage.insertItem(Self.item("taken"))
        let release = storage.itemWrites.hold()
        let names = ["a", "taken", "b", "c", "taken", "d"]
        let outcomes = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            for name in names {
                group.addTask {
                    do {
                        _ = try await storage.insertItem(Self.item(name))
                        return (name, true)
                    } catch let error as DaemonError where error.code == .duplicateItem {
                        return (name, false)
                    }
                }
            }
            try await Self.waitFor(names.count, in: storage)
            release()
            return try await group.reduce(into: [(String, Bool)]()) { $0.append($1) }
        }
        XCTAssertEqual(storage.itemWrites.commits, 2, "the first add's, then one for the six")
        XCTAssertEqual(outcomes.filter { !$0.1 }.map(\.0), ["taken", "taken"])
        XCTAssertEqual(Set(outcomes.filter(\.1).map(\.0)), ["a", "b", "c", "d"])
        XCTAssertEqual(try itemCount(storage), 5)
    }

    func testAQuotaIsCountedAcrossTheWritesOfOneCommit() async throws {
        let storage = try Storage(directory: directory, quota: KeychainQuota(items: 10, bytes: 1 << 20))
        let release = storage.itemWrites.hold()
        let accepted = try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<40 {
                group.addTask {
                    do {
                        _ = try await storage.insertItem(Self.item("user\(i)"))
                        return true
                    } catch let error as DaemonError where error.code == .keychainQuotaExceeded {
                        return false
                    }
                }
            }
            try await Self.waitFor(40, in: storage)
            release()
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        XCTAssertEqual(storage.itemWrites.commits, 1, "the forty shared one commit")
        XCTAssertEqual(accepted, 10)
        XCTAssertEqual(try itemCount(storage), 10)
    }
}
