import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB

/// What the state says of itself, in `meta`: its master key's check value and root, and the
/// attestation authority.
extension Storage {
    /// What the state says of its master key: whether one was ever confirmed, the root recorded
    /// with it (nil for a state made before roots were recorded: the software root), and whether
    /// it holds anything a key opens (`holdsData`), and whether it moved from the software root to
    /// the TPM root (`SoftwareRootMove`).
    func masterKeyRecord() throws -> (confirmed: Bool, root: String?, holdsData: Bool, moved: Bool) {
        try pool.read { db in
            let confirmed = try Bool.fetchOne(db, sql: "SELECT 1 FROM meta WHERE name = 'masterKeyCheck'") ?? false
            let root = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'root'").map {
                String(decoding: $0, as: UTF8.self)
            }
            let moved =
                try Bool.fetchOne(db, sql: "SELECT 1 FROM meta WHERE name = 'movedFromSoftwareRoot'") ?? false
            return (confirmed, root, try Self.holdsData(db), moved)
        }
    }

    /// Whether the state holds anything its master key opens, or that a passcode guards: users,
    /// class keys, items, keys, access groups.
    static func holdsData(_ db: Database) throws -> Bool {
        try Bool.fetchOne(
            db,
            sql: """
                SELECT EXISTS (SELECT 1 FROM user) OR EXISTS (SELECT 1 FROM class_key) OR EXISTS (SELECT 1 FROM item)
                    OR EXISTS (SELECT 1 FROM enclave_key) OR EXISTS (SELECT 1 FROM access_group)
                """
        ) ?? true
    }

    /// Whether `check` is the state's master-key check value; nil for a state that records none.
    func masterKeyMatches(_ check: Data) throws -> Bool? {
        try pool.read { db in
            try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'masterKeyCheck'").map {
                ConstantTime.equal($0, check)
            }
        }
    }

    /// What tells this state from another made with the same key file: a hash of its sealed
    /// attestation authority (random, made at its first start, kept as is on the software root).
    /// A copy of the state from before a move has the one the move recorded (`preMoveIdentity`).
    func identity() throws -> String {
        try pool.read { db in
            let sealed = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'attestationAuthority'")
            return Self.identity(of: sealed)
        }
    }

    static func identity(of sealedAuthority: Data?) -> String {
        SHA256.hash(data: sealedAuthority ?? Data()).map { String(format: "%02x", $0) }.joined()
    }

    /// The identity the state had on the software root, recorded by its move to the TPM root.
    func preMoveIdentity() throws -> String? {
        try pool.read { db in
            try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'preMoveIdentity'").map {
                String(decoding: $0, as: UTF8.self)
            }
        }
    }

    /// The sealed attestation authority, made by `make` and stored on first use.
    func attestationAuthority(make: () throws -> Data) throws -> Data {
        try pool.write { db in
            if let stored = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'attestationAuthority'") {
                return stored
            }
            let made = try make()
            try db.execute(sql: "INSERT INTO meta (name, value) VALUES ('attestationAuthority', ?)", arguments: [made])
            return made
        }
    }

    /// Records the master key's check value on first use; afterwards answers whether `check` is it.
    /// On first use also records which root gave the key (`root`), in the same transaction: the
    /// state's own word for its root, beside the TPM's blob.
    func confirmMasterKey(check: Data, root: MasterSecretRoot) throws -> Bool {
        try pool.write { db in
            if let stored = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'masterKeyCheck'") {
                return ConstantTime.equal(stored, check)
            }
            try db.execute(sql: "INSERT INTO meta (name, value) VALUES ('masterKeyCheck', ?)", arguments: [check])
            try db.execute(
                sql: "INSERT OR REPLACE INTO meta (name, value) VALUES ('root', ?)",
                arguments: [Data(root.rawValue.utf8)]
            )
            return true
        }
    }
}
