import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
import XCTest

@testable import EnclaveServer

/// The keychain's storage: a look-up narrowed in SQL finds what `KeychainRules.IndexedQuery.matches` says, and
/// reads no attributes it does not need.
final class KeychainStoreTests: XCTestCase {
    private var directory: String!

    override func setUp() {
        directory = NSTemporaryDirectory() + "keychain-store-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static let group = "/usr/bin/app"

    private func item(_ attributes: [String: KeychainValue], _ n: Int) -> StoredItem {
        var a = attributes
        a["class"] = .string("genp")
        a["agrp"] = .string(Self.group)
        return StoredItem(
            uid: 1000,
            accessGroup: Self.group,
            itemClass: "genp",
            attributes: a,
            protection: .whenUnlocked,
            flags: [],
            enrolmentGeneration: 0,
            sealed: ItemSealing.Sealed(wrappedKey: Data([1]), ciphertext: Data([2]), passwordSalt: nil),
            persistentRef: Data("ref-\(n)".utf8),
            created: Date(),
            modified: Date()
        )
    }

    /// Items that differ in each way a query can tell apart (the primary key, service and account,
    /// differs in each).
    private let stored: [[String: KeychainValue]] = [
        ["svce": .string("s"), "acct": .string("a")],
        ["svce": .string("s"), "acct": .string("b"), "labl": .string("L")],
        ["svce": .string("s"), "acct": .string("c"), "sync": .bool(true)],
        ["svce": .string("s"), "acct": .string("d"), "sync": .bool(false), "labl": .string("L")],
        ["svce": .string("s"), "acct": .string("e"), "sync": .int(1)],
        ["svce": .string("s"), "acct": .string("f"), "sync": .int(0)],
        ["svce": .data(Data([1])), "acct": .string("a")],
        ["svce": .string("t"), "acct": .string("a"), "gena": .data(Data([9]))],
        ["srvr": .string("h"), "acct": .string("a")],
    ]

    private let queries: [[String: KeychainValue]] = [
        [:],
        ["svce": .string("s")],
        ["svce": .string("s"), "acct": .string("a")],
        ["acct": .string("a")],
        ["labl": .string("L")],
        ["svce": .string("s"), "labl": .string("L")],
        ["sync": .bool(true)],
        ["sync": .bool(false), "svce": .string("s")],
        ["sync": .string("syna"), "svce": .string("s")],
        ["sync": .int(1), "acct": .string("e")],
        ["svce": .data(Data([1]))],
        ["gena": .data(Data([9]))],
        ["srvr": .string("h")],
        ["agrp": .string(group)],
        ["agrp": .string("/usr/bin/other")],
        ["agrp": .data(Data(group.utf8))],
        ["acct": .string("nobody")],
    ]

    /// The storage (SQL on the columns, then the rest on attributes) finds exactly the items the
    /// rule finds, whether it reads the attributes or not.
    func testALookUpFindsWhatTheRuleMatches() async throws {
        let storage = try Storage(directory: directory)
        var ids: [Int64] = []
        for (n, attributes) in stored.enumerated() { ids.append(try await storage.insertItem(item(attributes, n))) }
        for q in queries {
            var query = q
            query["class"] = .string("genp")
            let indexed = try KeychainRules.IndexedQuery(query)
            let expected = zip(stored, ids).filter { indexed.matches(item($0.0, 0).attributes) }.map(\.1)
            for reading in [true, false] {
                let found = try storage.items(matching: indexed, uid: 1000, readingAttributes: reading) { _ in
                    [Self.group]
                }
                XCTAssertEqual(found.map(\.id), expected, "\(q), reading attributes: \(reading)")
                let read = reading || !indexed.remaining.isEmpty
                XCTAssertTrue(
                    found.allSatisfy { $0.attributes.isEmpty != read },
                    "attributes read only when needed: \(q), \(reading)"
                )
            }
            XCTAssertEqual(
                try storage.items(
                    matching: indexed,
                    uid: 1001,
                    readingAttributes: true,
                    searchable: { _ in [Self.group] }
                ),
                [],
                "another user's"
            )
            XCTAssertEqual(
                try storage.items(
                    matching: indexed,
                    uid: 1000,
                    readingAttributes: true,
                    searchable: { _ in ["/usr/bin/other"] }
                ),
                [],
                "another group's"
            )
        }
    }

    /// A query naming an access group finds nothing outside it, whatever groups the caller passes.
    func testAQueryNamingAGroupStaysInIt() async throws {
        let storage = try Storage(directory: directory)
        var other = item(["svce": .string("s"), "acct": .string("a")], 0)
        other.accessGroup = "/usr/bin/other"
        other.attributes["agrp"] = .string(other.accessGroup)
        let mine = try await storage.insertItem(item(["svce": .string("s"), "acct": .string("a")], 1))
        let theirs = try await storage.insertItem(other)
        let both = [Self.group, other.accessGroup]
        func found(_ query: [String: KeychainValue]) throws -> [Int64] {
            try storage.items(
                matching: KeychainRules.IndexedQuery(query.merging(["class": .string("genp")]) { a, _ in a }),
                uid: 1000,
                readingAttributes: false,
                searchable: { _ in both }
            ).map(\.id)
        }
        XCTAssertEqual(try found([:]), [mine, theirs])
        XCTAssertEqual(try found(["agrp": .string(Self.group)]), [mine])
        XCTAssertEqual(try found(["agrp": .string(other.accessGroup)]), [theirs])
        XCTAssertEqual(try found(["agrp": .string("/usr/bin/third")]), [])
        XCTAssertEqual(
            try storage.items(
                matching: KeychainRules.IndexedQuery(["class": .string("genp"), "agrp": .string(other.accessGroup)]),
                uid: 1000,
                readingAttributes: false,
                searchable: { _ in [Self.group] }
            ),
            [],
            "a group the caller may not search"
        )
    }

    /// The groups a look-up searches may be read in the same visit to the pool (as a user's look-up
    /// reads the groups the person put its app in): an item in a configured group is found through
    /// them, and nothing when the app is in none.
    func testALookUpReadsTheGroupsItSearchesWithItsItems() async throws {
        let storage = try Storage(directory: directory)
        let shared = try await storage.insertItem(item(["svce": .string("s"), "acct": .string("a")], 0))
        let query = try KeychainRules.IndexedQuery(["class": .string("genp"), "svce": .string("s")])
        func found(for app: String) throws -> [Int64] {
            try storage.items(matching: query, uid: 1000, readingAttributes: false) { db in
                try Storage.accessGroups(db, uid: 1000, containing: app)
            }.map(\.id)
        }
        XCTAssertEqual(try found(for: "/usr/bin/member"), [], "in no group yet")
        try storage.setAccessGroup(uid: 1000, name: Self.group, apps: ["/usr/bin/member"])
        XCTAssertEqual(try found(for: "/usr/bin/member"), [shared])
        XCTAssertEqual(try found(for: "/usr/bin/stranger"), [])
    }

    /// An item read without its attributes is never written back.
    func testAnItemReadWithoutAttributesIsNotWritten() async throws {
        let storage = try Storage(directory: directory)
        var plain = item(["svce": .string("s"), "acct": .string("a")], 0)
        plain.id = try await storage.insertItem(plain)
        let query = try KeychainRules.IndexedQuery(["class": .string("genp"), "svce": .string("s")])
        guard
            let read = try storage.items(
                matching: query,
                uid: 1000,
                readingAttributes: false,
                searchable: { _ in [Self.group] }
            )
            .first
        else {
            return XCTFail("not found")
        }
        XCTAssertEqual(read.attributes, [:])
        XCTAssertThrowsError(try storage.updateItems([(read, plain.modified)])) {
            guard ($0 as? DaemonError)?.code == .attributesNotRead else { return XCTFail("\($0)") }
        }
        do {
            _ = try await storage.insertItem(read)
            XCTFail("inserted")
        } catch let error as DaemonError where error.code == .attributesNotRead {}
        let again = try storage.items(
            matching: query,
            uid: 1000,
            readingAttributes: true,
            searchable: { _ in [Self.group] }
        )
        XCTAssertEqual(again.first?.attributes, plain.attributes, "the row kept its attributes")
    }

    /// An update keeps the column in step: an item made synchronizable is found as such.
    func testAnUpdateMovesAnItemBetweenSynchronizableAndNot() async throws {
        let storage = try Storage(directory: directory)
        var plain = item(["svce": .string("s"), "acct": .string("a")], 0)
        plain.id = try await storage.insertItem(plain)
        let synchronizable = try KeychainRules.IndexedQuery(["class": .string("genp"), "sync": .bool(true)])
        XCTAssertEqual(
            try storage.items(
                matching: synchronizable,
                uid: 1000,
                readingAttributes: false,
                searchable: { _ in [Self.group] }
            ),
            []
        )
        var changed = plain
        changed.attributes["sync"] = .bool(true)
        changed.modified = plain.modified.addingTimeInterval(1)
        try storage.updateItems([(changed, plain.modified)])
        XCTAssertEqual(
            try storage.items(
                matching: synchronizable,
                uid: 1000,
                readingAttributes: false,
                searchable: { _ in [Self.group] }
            )
            .map(\.id),
            [plain.id]
        )
    }

    /// A keychain from before the column: the migration fills it from each item's attributes; a
    /// row whose attributes do not decode does not keep the daemon from starting.
    func testTheMigrationFillsTheColumnFromTheAttributes() async throws {
        var storage: Storage? = try Storage(directory: directory)
        for (n, attributes) in stored.enumerated() { _ = try await storage!.insertItem(item(attributes, n)) }
        try await storage!.pool.write { db in
            try db.execute(sql: "ALTER TABLE item DROP COLUMN synchronizable")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v13-synchronizable-column'")
            try db.execute(sql: "UPDATE item SET attributes = x'7b' WHERE service = 's' AND account = 'c'")
        }
        storage = nil
        let reopened = try Storage(directory: directory)
        let synchronizable = try KeychainRules.IndexedQuery(["class": .string("genp"), "sync": .bool(true)])
        let found = try reopened.items(
            matching: synchronizable,
            uid: 1000,
            readingAttributes: true,
            searchable: { _ in [Self.group] }
        )
        XCTAssertEqual(
            found.compactMap { KeychainRules.string($0.attributes, "acct") },
            ["e"],
            "the damaged synchronizable item is skipped, the other found"
        )
    }
}
