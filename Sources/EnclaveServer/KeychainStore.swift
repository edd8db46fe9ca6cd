import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB

/// How much of the keychain one user may fill: every item and byte is on the disk every user's
/// counters are written to. Our choice: far beyond what apps keep (passwords, tokens, keys), far
/// below a disk.
struct KeychainQuota: Sendable, Equatable {
    var items: Int
    var bytes: Int
    /// Secure Enclave keys (their records); as many as items, since most live in one.
    var keys: Int { items }
    /// Of which one app may hold a quarter: a key kept only as a `dataRepresentation` has no
    /// delete in Apple's API, so one app making keys without end must not use up the others'.
    var keysPerApp: Int { max(1, keys / 4) }
    static let standard = KeychainQuota(
        items: DaemonConfiguration.standardKeychainQuotaItems,
        bytes: DaemonConfiguration.standardKeychainQuotaBytes
    )
}

extension Storage {
    private static let attributeEncoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .secondsSince1970
        return e
    }()
    private static let attributeDecoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .secondsSince1970
        return d
    }()

    /// Durable when it returns, committed with the adds that arrived with it (`GroupCommit`); the
    /// caller's actor serves other requests meanwhile. `passcodeEpoch`: for an item sealed under the
    /// passcode class key, the user's passcode epoch when it was sealed — if the passcode was
    /// removed while the add waited for its commit (the class key and its items went), the add
    /// fails (`passcodeRemoved`) rather than leave an item no key opens.
    func insertItem(_ item: StoredItem, passcodeEpoch: UInt64? = nil) async throws -> Int64 {
        try Self.checkComplete(item)
        let attributes = try Self.attributeEncoder.encode(item.attributes)
        let size = item.sealed.ciphertext.count + attributes.count
        do {
            return try await itemWrites.write { db in
                if let passcodeEpoch {
                    let now = try Int64.fetchOne(
                        db,
                        sql: "SELECT passcodeEpoch FROM user WHERE uid = ?",
                        arguments: [Int64(item.uid)]
                    )
                    let key =
                        try Bool.fetchOne(
                            db,
                            sql: "SELECT 1 FROM class_key WHERE uid = ? AND class = ?",
                            arguments: [Int64(item.uid), KeyClass.passcodeSet.rawValue]
                        ) ?? false
                    guard now == Int64(passcodeEpoch), key else {
                        throw DaemonError(.passcodeRemoved, "the passcode this item was sealed under was removed")
                    }
                }
                try self.checkQuota(db, uid: item.uid, newItems: 1, growth: size)
                try db.execute(
                    sql: """
                        INSERT INTO item (uid, accessGroup, class, primaryKey, service, account, server, attributes, protection, flags,
                                          enrolmentGeneration, wrappedKey, ciphertext, passwordSalt, persistentRef, created, modified,
                                          sealVersion, heldKey, synchronizable)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 2, ?, ?)
                        """,
                    arguments: [
                        Int64(item.uid), item.accessGroup, item.itemClass, item.primaryKey,
                        KeychainRules.string(item.attributes, "svce"), KeychainRules.string(item.attributes, "acct"),
                        KeychainRules.string(item.attributes, "srvr"),
                        attributes, item.protection.rawValue, Int64(bitPattern: item.flags.rawValue),
                        Int64(item.enrolmentGeneration),
                        item.sealed.wrappedKey, item.sealed.ciphertext, item.sealed.passwordSalt, item.persistentRef,
                        item.created.timeIntervalSince1970, item.modified.timeIntervalSince1970, item.heldKey?.bytes,
                        item.synchronizable,
                    ]
                )
                return db.lastInsertedRowID
            }
        } catch let e as DatabaseError where e.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw DaemonError(.duplicateItem, "an item with the same primary attributes exists")
        }
    }

    /// Writes the items, each only if its row is still as it was read (`expectedModified`), all in
    /// one transaction: an update that waited for a prompt never overwrites a change made
    /// meanwhile, and one that cannot write every item writes none (as Apple's keychain, which
    /// runs an update in one transaction). Shreds what it replaced.
    /// Synchronous, on the caller's actor, unlike an add: matching, proving and writing an update
    /// must not let another write of the same user in between (two updates of one item would
    /// otherwise refuse each other).
    func updateItems(_ changes: [(item: StoredItem, expectedModified: Date)]) throws {
        let rows = try changes.map { change in
            try Self.checkComplete(change.item)
            return (change.item, change.expectedModified, try Self.attributeEncoder.encode(change.item.attributes))
        }
        do {
            try pool.write { db in
                // The update's growth as a whole (one item may shrink what another grows), per user.
                var growth: [UInt32: Int] = [:]
                for (item, _, attributes) in rows {
                    let old =
                        try Int.fetchOne(
                            db,
                            sql: "SELECT LENGTH(ciphertext) + LENGTH(attributes) FROM item WHERE id = ? AND uid = ?",
                            arguments: [item.id, Int64(item.uid)]
                        ) ?? 0
                    growth[item.uid, default: 0] += item.sealed.ciphertext.count + attributes.count - old
                }
                for (uid, bytes) in growth { try checkQuota(db, uid: uid, newItems: 0, growth: bytes) }
                for (item, expectedModified, attributes) in rows {
                    try db.execute(
                        sql: """
                            UPDATE item SET primaryKey = ?, service = ?, account = ?, server = ?, attributes = ?, protection = ?, flags = ?,
                                enrolmentGeneration = ?, wrappedKey = ?, ciphertext = ?, passwordSalt = ?, modified = ?, sealVersion = 2, synchronizable = ?
                            WHERE id = ? AND uid = ? AND modified = ?
                            """,
                        arguments: [
                            item.primaryKey, KeychainRules.string(item.attributes, "svce"),
                            KeychainRules.string(item.attributes, "acct"),
                            KeychainRules.string(item.attributes, "srvr"), attributes, item.protection.rawValue,
                            Int64(bitPattern: item.flags.rawValue),
                            Int64(item.enrolmentGeneration), item.sealed.wrappedKey, item.sealed.ciphertext,
                            item.sealed.passwordSalt,
                            item.modified.timeIntervalSince1970, item.synchronizable, item.id, Int64(item.uid),
                            expectedModified.timeIntervalSince1970,
                        ]
                    )
                    if db.changesCount == 0 { throw DaemonError(.itemChangedMeanwhile, "the item changed meanwhile") }
                }
            }
            // The secrets it replaced are as gone as deleted ones.
            shred()
        } catch let e as DatabaseError where e.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw DaemonError(.duplicateItem, "an item with the same primary attributes exists")
        }
    }

    /// An item read without its attributes is never written back: its row would lose them, and
    /// its primary key and synchronizable column would be wrong.
    private static func checkComplete(_ item: StoredItem) throws {
        guard item.attributesRead else {
            throw DaemonError(.attributesNotRead, "an item read without its attributes is never written back")
        }
    }

    /// Whether the row is still as it was read: not deleted, not changed since `modified`.
    func itemUnchanged(id: Int64, uid: UInt32, modified: Date) throws -> Bool {
        try pool.read { db in
            try Double.fetchOne(
                db,
                sql: "SELECT modified FROM item WHERE id = ? AND uid = ?",
                arguments: [id, Int64(uid)]
            ) == modified.timeIntervalSince1970
        }
    }

    /// Refuses a change that would take `uid` past its quota; within the change's own transaction.
    private func checkQuota(_ db: Database, uid: UInt32, newItems: Int, growth: Int) throws {
        guard newItems > 0 || growth > 0 else { return }
        let row = try Row.fetchOne(
            db,
            sql: "SELECT items, bytes FROM item_usage WHERE uid = ?",
            arguments: [Int64(uid)]
        )
        let items: Int = row?["items"] ?? 0
        let bytes: Int = row?["bytes"] ?? 0
        if items + newItems > quota.items {
            throw DaemonError(
                .keychainQuotaExceeded,
                "this user's keychain holds \(items) items, the most it may (\(quota.items))"
            )
        }
        if bytes + growth > quota.bytes {
            throw DaemonError(.keychainQuotaExceeded, "this user's keychain would pass its \(quota.bytes >> 20) MiB")
        }
    }

    /// The item's wrong application passwords so far.
    func applicationPasswordAttempts(item id: Int64) throws -> PasswordAttempts {
        try pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT failures, delayStarted FROM item_password_attempts WHERE item = ?",
                    arguments: [id]
                )
            else {
                return PasswordAttempts()
            }
            let started: Double? = row["delayStarted"]
            return PasswordAttempts(
                failures: row["failures"],
                delayStartedAt: started.map(Date.init(timeIntervalSince1970:))
            )
        }
    }

    /// Stores the count, durably, before the answer leaves the daemon (none: the row goes).
    func setPasswordAttempts(_ attempts: PasswordAttempts, item id: Int64) throws {
        try pool.write { db in
            if attempts.failures == 0 {
                try db.execute(sql: "DELETE FROM item_password_attempts WHERE item = ?", arguments: [id])
            } else {
                try db.execute(
                    sql: """
                        INSERT INTO item_password_attempts (item, failures, delayStarted) VALUES (?, ?, ?)
                        ON CONFLICT(item) DO UPDATE SET failures = excluded.failures, delayStarted = excluded.delayStarted
                        """,
                    arguments: [id, attempts.failures, attempts.delayStartedAt?.timeIntervalSince1970]
                )
            }
        }
    }

    /// Deletes the items, the keys they hold with them, and then shreds the WAL: when this
    /// returns, no file of the state directory holds them.
    /// Synchronous, as an update (two deletions of one item must not both succeed).
    func deleteItems(ids: [Int64], uid: UInt32) throws {
        guard !ids.isEmpty else { return }
        try pool.write { db in
            for id in ids {
                try db.execute(sql: "DELETE FROM item WHERE id = ? AND uid = ?", arguments: [id, Int64(uid)])
            }
        }
        shred()
    }

    static func attributes(from data: Data) throws -> [String: KeychainValue] {
        try attributeDecoder.decode([String: KeychainValue].self, from: data)
    }

    /// The columns `item(from:)` reads, in the order of `itemColumns`, and `primaryKey`, which the
    /// v10 migration compares: read by their place, not by name (GRDB finds a column by name by
    /// lowercasing every name it compares, per value read: ~5 % of the daemon's CPU under
    /// look-ups). The v10 migration selects them all, so each must exist at v10: a column added
    /// later is read by name where it is needed, not listed here.
    enum ItemColumn: Int, CaseIterable {
        case id, uid, accessGroup, itemClass, attributes, protection, flags, enrolmentGeneration, wrappedKey
        case ciphertext, passwordSalt, persistentRef, created, modified, heldKey, primaryKey

        var name: String { self == .itemClass ? "class" : "\(self)" }
    }

    /// `SELECT` these from `item` for `item(from:)`.
    static let itemColumns = ItemColumn.allCases.map(\.name).joined(separator: ", ")

    /// An item from a row that selected `itemColumns`; its attributes are decoded only if
    /// `readingAttributes` (a row read from a cursor then never copies them).
    static func item(from row: Row, readingAttributes: Bool = true) throws -> StoredItem {
        func column(_ c: ItemColumn) -> Int { c.rawValue }
        return StoredItem(
            id: row[column(.id)],
            uid: UInt32(row[column(.uid)] as Int64),
            accessGroup: row[column(.accessGroup)],
            itemClass: row[column(.itemClass)],
            attributes: readingAttributes ? try attributes(from: row[column(.attributes)]) : [:],
            protection: Protection(rawValue: row[column(.protection)]) ?? .whenUnlocked,
            flags: AccessControlFlags(rawValue: UInt64(bitPattern: row[column(.flags)] as Int64)),
            enrolmentGeneration: UInt64(row[column(.enrolmentGeneration)] as Int64),
            sealed: ItemSealing.Sealed(
                wrappedKey: row[column(.wrappedKey)],
                ciphertext: row[column(.ciphertext)],
                passwordSalt: row[column(.passwordSalt)]
            ),
            persistentRef: row[column(.persistentRef)],
            created: Date(timeIntervalSince1970: row[column(.created)]),
            modified: Date(timeIntervalSince1970: row[column(.modified)]),
            heldKey: (row[column(.heldKey)] as Data?).map(KeyHandle.init),
            attributesRead: readingAttributes
        )
    }
}

extension Storage {
    /// The configured groups an app belongs to.
    func accessGroups(uid: UInt32, containing app: String) throws -> [String] {
        try pool.unsafeRead { db in try Self.accessGroups(db, uid: uid, containing: app) }
    }

    static func accessGroups(_ db: Database, uid: UInt32, containing app: String) throws -> [String] {
        try String.fetchAll(
            db.cachedStatement(sql: "SELECT name FROM access_group WHERE uid = ? AND app = ? ORDER BY name"),
            arguments: [Int64(uid), app]
        )
    }

    func accessGroups(uid: UInt32) throws -> [String: [String]] {
        try pool.read { db in
            var groups: [String: [String]] = [:]
            for row in try Row.fetchAll(
                db,
                sql: "SELECT name, app FROM access_group WHERE uid = ? ORDER BY name, app",
                arguments: [Int64(uid)]
            ) {
                groups[row["name"], default: []].append(row["app"])
            }
            return groups
        }
    }

    /// Replaces the group's members; no apps removes the group.
    func setAccessGroup(uid: UInt32, name: String, apps: [String]) throws {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM access_group WHERE uid = ? AND name = ?", arguments: [Int64(uid), name])
            for app in Set(apps) {
                try db.execute(
                    sql: "INSERT INTO access_group (uid, name, app) VALUES (?, ?, ?)",
                    arguments: [Int64(uid), name, app]
                )
            }
        }
    }
}
