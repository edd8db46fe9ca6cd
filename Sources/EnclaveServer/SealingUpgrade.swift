import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB

extension Storage {
    /// State written before class keys, upgraded in place at start: each item whose key was
    /// wrapped under the key the master key derives for its user is rewrapped under its class key
    /// (the secret itself is not touched), and an item that holds a Secure Enclave key blob from
    /// before key records (`HeldKey`) is bound to it, so deleting the item revokes the blob. One
    /// transaction: a crash leaves all items upgraded or none. Then the WAL is shredded (also what a
    /// deletion could not shred before a crash), so the old wraps are not left in it. Answers how many items were upgraded.
    func upgradeSealing(master: SymmetricKey) throws -> Int {
        let upgraded = try pool.write { db -> Int in
            let rows = try Row.fetchAll(db, sql: "SELECT \(Self.itemColumns) FROM item WHERE sealVersion = 1")
            for row in rows {
                let item = try Self.item(from: row)
                let legacy = ItemSealing.legacyUserKey(master: master, uid: item.uid)
                let classKey = try Self.classKey(
                    db,
                    uid: item.uid,
                    KeyClass(item.protection),
                    wrappingKey: KeyHierarchy.wrappingKey(master: master, uid: item.uid)
                )
                guard
                    let sealed = try? ItemSealing.rewrap(
                        item.sealed,
                        from: legacy,
                        to: classKey,
                        identity: item.identity
                    )
                else {
                    // Damaged before: it stays as it is, and reading it says so.
                    logger.error(
                        "a keychain item does not open with the master key; left as it is",
                        metadata: ["uid": "\(item.uid)", "item": "\(item.id)"]
                    )
                    continue
                }
                // An item with an application password cannot be read without it; no key item has one.
                let secret =
                    item.sealed.passwordSalt == nil
                    ? try? ItemSealing.open(item.sealed, key: legacy, identity: item.identity) : nil
                let held = secret.flatMap {
                    HeldKey.blob(itemClass: item.itemClass, attributes: item.attributes, secret: $0)
                }.flatMap(KeyBlob.handle(of:))
                try db.execute(
                    sql: "UPDATE item SET wrappedKey = ?, sealVersion = 2, heldKey = ? WHERE id = ?",
                    arguments: [sealed.wrappedKey, held?.bytes, item.id]
                )
            }
            return rows.count
        }
        shred()
        if upgraded > 0 {
            logger.notice("keychain items rewrapped under class keys", metadata: ["count": "\(upgraded)"])
        }
        return upgraded
    }

    /// A database written before `secure_delete` may keep rows deleted back then in its free pages,
    /// sealed under keys the master key still derives: it is rewritten once (VACUUM, then the WAL
    /// shredded), and `meta` remembers. A crash before the mark only means it runs again.
    func vacuumOnceForClassKeys() throws {
        let done = try pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM meta WHERE name = 'vacuumedForClassKeys'") ?? false
        }
        guard !done else { return }
        try pool.writeWithoutTransaction { db in try db.execute(sql: "VACUUM") }
        try pool.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO meta (name, value) VALUES ('vacuumedForClassKeys', X'01')")
        }
        shred()
    }
}
