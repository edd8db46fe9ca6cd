import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB

/// The daemon's record of a Secure Enclave key: the key its blob is sealed under, wrapped under
/// the key of its class. While the record exists every copy of the blob works; deleted, none does.
struct KeyRecord: Sendable, Equatable {
    var handle: KeyHandle
    var uid: UInt32
    /// The key's owner (`AppIdentity.ownGroup`).
    var app: String
    var keyClass: KeyClass
    /// Empty once its class key was destroyed (the passcode removed): the key's own key is gone,
    /// and the record stays only so its blob answers "invalidated" rather than "unknown".
    var wrapped: Data
    var created: Date

    var isDestroyed: Bool { wrapped.isEmpty }
}

extension Storage {
    /// The user's key of `keyClass`, made (random, stored wrapped under `wrappingKey`) on first use.
    func classKey(uid: UInt32, _ keyClass: KeyClass, wrappingKey: SymmetricKey) throws -> SymmetricKey {
        try pool.write { db in try Self.classKey(db, uid: uid, keyClass, wrappingKey: wrappingKey) }
    }

    static func classKey(
        _ db: Database,
        uid: UInt32,
        _ keyClass: KeyClass,
        wrappingKey: SymmetricKey
    ) throws -> SymmetricKey {
        let context = KeyHierarchy.classKeyContext(uid: uid, keyClass)
        if let wrapped = try Data.fetchOne(
            db,
            sql: "SELECT wrapped FROM class_key WHERE uid = ? AND class = ?",
            arguments: [Int64(uid), keyClass.rawValue]
        ) {
            guard let key = KeyHierarchy.unwrap(wrapped, under: wrappingKey, context: context) else {
                throw DaemonError(
                    .classKeyDamaged,
                    "the \(keyClass.rawValue) class key of uid \(uid) does not open with the master key"
                )
            }
            return key
        }
        let key = SymmetricKey(size: .bits256)
        try db.execute(
            sql: "INSERT INTO class_key (uid, class, wrapped) VALUES (?, ?, ?)",
            arguments: [
                Int64(uid), keyClass.rawValue, try KeyHierarchy.wrap(key, under: wrappingKey, context: context),
            ]
        )
        return key
    }

    /// Stores a new key's record, durably, before its blob is answered; within the user's quota.
    func insertKeyRecord(_ r: KeyRecord) throws {
        try pool.write { db in
            // Live keys only: the records left of keys destroyed with the passcode hold nothing.
            let count =
                try Int.fetchOne(
                    db,
                    sql: "SELECT COUNT(*) FROM enclave_key WHERE uid = ? AND LENGTH(wrapped) > 0",
                    arguments: [Int64(r.uid)]
                ) ?? 0
            if count >= quota.keys {
                throw DaemonError(
                    .keyQuotaExceeded,
                    "this user has \(count) Secure Enclave keys, the most it may; delete some (their keychain items or rights)"
                )
            }
            let ofApp =
                try Int.fetchOne(
                    db,
                    sql: "SELECT COUNT(*) FROM enclave_key WHERE uid = ? AND app = ? AND LENGTH(wrapped) > 0",
                    arguments: [Int64(r.uid), r.app]
                ) ?? 0
            if ofApp >= quota.keysPerApp {
                throw DaemonError(
                    .keyQuotaExceeded,
                    "this app has \(ofApp) Secure Enclave keys, the most one app may; delete some (their keychain items or rights)"
                )
            }
            try db.execute(
                sql: "INSERT INTO enclave_key (handle, uid, app, class, wrapped, created) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [
                    r.handle.bytes, Int64(r.uid), r.app, r.keyClass.rawValue, r.wrapped,
                    r.created.timeIntervalSince1970,
                ]
            )
        }
    }

    func keyRecord(_ handle: KeyHandle) throws -> KeyRecord? {
        try pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT * FROM enclave_key WHERE handle = ?",
                    arguments: [handle.bytes]
                ),
                let keyClass = KeyClass(rawValue: row["class"])
            else { return nil }
            return KeyRecord(
                handle: handle,
                uid: UInt32(row["uid"] as Int64),
                app: row["app"],
                keyClass: keyClass,
                wrapped: row["wrapped"],
                created: Date(timeIntervalSince1970: row["created"])
            )
        }
    }

    /// Whether a blob from before key records was revoked (its item was deleted).
    func isRevoked(_ handle: KeyHandle) throws -> Bool {
        try pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM revoked_key WHERE handle = ?", arguments: [handle.bytes]) ?? false
        }
    }

    /// Removing the passcode, inside the transaction of the user's new record: the `passcodeSet`
    /// class key, its items and its keys' own keys are destroyed (the caller shreds the WAL after).
    /// Answers how many items went.
    static func removePasscodeClass(uid: UInt32, _ db: Database) throws -> Int {
        let uid = Int64(uid)
        let keyClass = KeyClass.passcodeSet.rawValue
        try db.execute(
            sql: "DELETE FROM item WHERE uid = ? AND protection = ?",
            arguments: [uid, Protection.whenPasscodeSetThisDeviceOnly.rawValue]
        )
        let items = db.changesCount
        try db.execute(
            sql: "UPDATE enclave_key SET wrapped = X'' WHERE uid = ? AND class = ?",
            arguments: [uid, keyClass]
        )
        try db.execute(sql: "DELETE FROM class_key WHERE uid = ? AND class = ?", arguments: [uid, keyClass])
        return items
    }
}
