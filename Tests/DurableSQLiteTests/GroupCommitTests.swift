import DurableSQLite
import Foundation
import GRDB
import Synchronization
import XCTest

/// Group commit on its own: many writes share commits, a failing one fails alone.
final class GroupCommitTests: XCTestCase {
    func testConcurrentWritesShareCommitsAndAFailingOneIsRolledBackAlone() async throws {
        let directory = NSTemporaryDirectory() + "group-commit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pool = try DatabasePool(path: directory + "/db.sqlite")
        try await pool.write { db in try db.execute(sql: "CREATE TABLE t (n INTEGER PRIMARY KEY)") }
        let commits = CommitCounter()
        pool.add(transactionObserver: commits, extent: .databaseLifetime)
        let writer = GroupCommit(pool: pool, batchLimit: 64)

        let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
            for n in 0..<500 {
                group.addTask {
                    do {
                        return (
                            n,
                            try await writer.write { db -> Bool in
                                try db.execute(sql: "INSERT INTO t (n) VALUES (?)", arguments: [n])
                                // a constraint failure after a write
                                if n % 100 == 7 { try db.execute(sql: "INSERT INTO t (n) VALUES (?)", arguments: [n]) }
                                return true
                            }
                        )
                    } catch {
                        return (n, false)
                    }
                }
            }
            return await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
        }
        let failed = outcomes.filter { !$0.value }.keys.sorted()
        XCTAssertEqual(failed, [7, 107, 207, 307, 407])
        let stored = try await pool.read { db in try Int.fetchAll(db, sql: "SELECT n FROM t ORDER BY n") }
        XCTAssertEqual(
            stored,
            (0..<500).filter { $0 % 100 != 7 },
            "each failing write rolled back alone, every other one committed"
        )
        XCTAssertLessThan(commits.count, 100, "concurrent writes shared commits (\(commits.count) for 500)")
        XCTAssertGreaterThanOrEqual(commits.count, 500 / 64)
        XCTAssertEqual(writer.commits, commits.count, "every transaction it counts is one SQLite committed")
    }
}

private final class CommitCounter: TransactionObserver, Sendable {
    private let commits = Atomic(0)
    var count: Int { commits.load(ordering: .relaxed) }
    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { true }
    func databaseDidChange(with event: DatabaseEvent) {}
    func databaseDidCommit(_ db: Database) { commits.add(1, ordering: .relaxed) }
    func databaseDidRollback(_ db: Database) {}
}
