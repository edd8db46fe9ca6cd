import DurableSQLite
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB

/// Which of a user's keychain items a query finds: narrowed in SQL by the item table's columns,
/// then by what is left of the query on each item's attributes.
extension Storage {
    /// The user's items in the groups the caller may search — read by `searchable` in the same
    /// visit to the pool and the same snapshot (`readSnapshot`), so a look-up takes one reader,
    /// not one for the groups and one for the items (each taking costs more than either
    /// statement), and the groups it searched are the ones its items were read with; a query
    /// naming one group finds nothing outside it — that match `query`, in creation order:
    /// narrowed in SQL by the columns, then by what is left of the query on each item's
    /// attributes. With nothing left and `readingAttributes` false, no item's attributes are
    /// decoded (they are empty in what is returned, which `insertItem` and `updateItem` refuse):
    /// the common look-up (service and account, for the secret) reads no attributes at all.
    func items(
        matching query: KeychainRules.IndexedQuery,
        uid: UInt32,
        readingAttributes: Bool,
        searchable: (Database) throws -> [String]
    ) throws -> [StoredItem] {
        try pool.readSnapshot { db in
            let accessGroups = try searchable(db)
            let groups = query.accessGroup.map { asked in accessGroups.filter { $0 == asked } } ?? accessGroups
            guard !groups.isEmpty else { return [] }
            return try Self.items(
                db,
                uid: uid,
                accessGroups: groups,
                itemClass: query.itemClass,
                service: query.service,
                account: query.account,
                server: query.server,
                persistentRef: query.persistentRef,
                synchronizable: query.synchronizable,
                readingAttributes: readingAttributes || !query.remaining.isEmpty
            )
            .filter { query.remainingMatch($0.attributes) }
        }
    }

    /// Items narrowed in SQL by the columns given (`accessGroups` nil: every group of the user), in
    /// one statement whose compiled form is kept (one per shape of query): a look-up's time was
    /// mostly preparing SQL and opening transactions.
    private static func items(
        _ db: Database,
        uid: UInt32,
        accessGroups: [String]?,
        itemClass: String?,
        service: String?,
        account: String?,
        server: String?,
        persistentRef: Data?,
        synchronizable: Bool?,
        readingAttributes: Bool
    ) throws -> [StoredItem] {
        var conditions = ["uid = ?"]
        var arguments: StatementArguments = [Int64(uid)]
        if let groups = accessGroups {
            conditions.append("accessGroup IN (" + groups.map { _ in "?" }.joined(separator: ", ") + ")")
            for g in groups { arguments += [g] }
        }
        for (column, value) in [
            ("class", itemClass), ("service", service), ("account", account), ("server", server),
        ] {
            if let value {
                conditions.append("\(column) = ?")
                arguments += [value]
            }
        }
        if let persistentRef {
            conditions.append("persistentRef = ?")
            arguments += [persistentRef]
        }
        if let synchronizable {
            conditions.append("synchronizable = ?")
            arguments += [synchronizable]
        }
        let statement = try db.cachedStatement(
            sql: "SELECT \(itemColumns) FROM item WHERE " + conditions.joined(separator: " AND ") + " ORDER BY id"
        )
        // Read in place from the statement: no row copied, no attributes copied unless decoded.
        return try Array(
            Row.fetchCursor(statement, arguments: arguments).map { row in
                try item(from: row, readingAttributes: readingAttributes)
            }
        )
    }

    /// Every item of the user, of every app — or the one `persistentRef` names — for `lactl keychain`.
    func allItems(uid: UInt32, persistentRef: Data? = nil) throws -> [StoredItem] {
        try pool.unsafeRead { db in
            try Self.items(
                db,
                uid: uid,
                accessGroups: nil,
                itemClass: nil,
                service: nil,
                account: nil,
                server: nil,
                persistentRef: persistentRef,
                synchronizable: nil,
                readingAttributes: true
            )
        }
    }
}
