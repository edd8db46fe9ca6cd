import DurableSQLite
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
import Logging

/// SQLite through GRDB, WAL with synchronous=FULL: a write has reached the disk when `save` returns.
final class Storage: Sendable {
    let pool: DatabasePool
    /// Keychain adds, committed together when they arrive together.
    let itemWrites: GroupCommit
    let directory: String
    /// How much of the keychain one user may fill.
    let quota: KeychainQuota
    let logger: Logger
    /// Audit entries kept per user, the newest (our choice: about a month of a busy desktop).
    static let auditRowsPerUser = 10_000

    init(
        directory: String,
        quota: KeychainQuota = .standard,
        logger: Logger = Logger(label: "laenclaved.storage")
    ) throws {
        self.directory = directory
        self.quota = quota
        self.logger = logger
        try Self.makePrivateDirectory(directory)
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            // Deleted means gone (`shred`): freed content is zeroed, and the WAL, where old page
            // images linger, is truncated after deletions and kept small otherwise.
            try db.execute(sql: "PRAGMA secure_delete = ON")
            try db.execute(sql: "PRAGMA journal_size_limit = \(1 << 20)")
        }
        // A truncating checkpoint waits for readers to leave the WAL, briefly.
        configuration.busyMode = .timeout(2)
        let path = directory + "/enclave.sqlite"
        // Every commit synced before it returns: a counter that guards against guessing is on the
        // disk before the answer leaves (`StorageTests`).
        let pool = try DurablePool.open(path: path, configuration: configuration, keeping: "counters")
        self.pool = pool
        itemWrites = GroupCommit(pool: pool)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE user (
                        uid INTEGER PRIMARY KEY,
                        ledger BLOB NOT NULL,
                        passcode BLOB,
                        domainSecret BLOB NOT NULL,
                        enrolmentGeneration INTEGER NOT NULL,
                        enrolment BLOB NOT NULL
                    );
                    CREATE TABLE audit (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        time REAL NOT NULL,
                        uid INTEGER NOT NULL,
                        pid INTEGER NOT NULL,
                        app TEXT NOT NULL,
                        operation TEXT NOT NULL,
                        policy INTEGER,
                        result TEXT NOT NULL
                    );
                    CREATE INDEX audit_uid ON audit(uid, id);
                    """
            )
        }
        migrator.registerMigration("v2-keychain") { db in
            try db.execute(
                sql: """
                    CREATE TABLE item (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        uid INTEGER NOT NULL,
                        accessGroup TEXT NOT NULL,
                        class TEXT NOT NULL,
                        primaryKey TEXT NOT NULL,
                        service TEXT,
                        account TEXT,
                        server TEXT,
                        attributes BLOB NOT NULL,
                        protection TEXT NOT NULL,
                        flags INTEGER NOT NULL,
                        enrolmentGeneration INTEGER NOT NULL,
                        wrappedKey BLOB NOT NULL,
                        ciphertext BLOB NOT NULL,
                        passwordSalt BLOB,
                        persistentRef BLOB NOT NULL UNIQUE,
                        created REAL NOT NULL,
                        modified REAL NOT NULL,
                        UNIQUE (uid, accessGroup, class, primaryKey)
                    );
                    CREATE INDEX item_lookup ON item(uid, accessGroup, class, service, account);
                    CREATE INDEX item_server ON item(uid, accessGroup, class, server);
                    """
            )
        }
        migrator.registerMigration("v3-account-index") { db in
            // Apps often look items up by account alone; without this, that is a scan of the class.
            try db.execute(sql: "CREATE INDEX item_account ON item(uid, accessGroup, class, account)")
        }
        migrator.registerMigration("v4-access-groups") { db in
            try db.execute(
                sql:
                    "CREATE TABLE access_group (uid INTEGER NOT NULL, name TEXT NOT NULL, app TEXT NOT NULL, PRIMARY KEY (uid, name, app))"
            )
        }
        migrator.registerMigration("v5-passcode-epoch") { db in
            try db.execute(sql: "ALTER TABLE user ADD COLUMN passcodeEpoch INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v6-meta") { db in
            try db.execute(sql: "CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL)")
        }
        migrator.registerMigration("v7-bounded-per-user") { db in
            // The audit log keeps each user's newest entries: an app that makes thousands of
            // requests a second cannot fill the disk every user's counters are written to.
            try db.execute(
                sql: """
                    CREATE TRIGGER audit_rotation AFTER INSERT ON audit WHEN NEW.id % 256 = 0
                    BEGIN
                        DELETE FROM audit WHERE uid = NEW.uid AND id <= (
                            SELECT id FROM audit WHERE uid = NEW.uid ORDER BY id DESC LIMIT 1 OFFSET \(Self.auditRowsPerUser));
                    END;
                    """
            )
            // What each user's items take, kept by the database itself, for the keychain quota.
            try db.execute(
                sql: """
                    CREATE TABLE item_usage (uid INTEGER PRIMARY KEY, items INTEGER NOT NULL, bytes INTEGER NOT NULL);
                    INSERT INTO item_usage (uid, items, bytes)
                        SELECT uid, COUNT(*), SUM(LENGTH(ciphertext) + LENGTH(attributes)) FROM item GROUP BY uid;
                    CREATE TRIGGER item_usage_insert AFTER INSERT ON item BEGIN
                        INSERT INTO item_usage (uid, items, bytes) VALUES (NEW.uid, 1, LENGTH(NEW.ciphertext) + LENGTH(NEW.attributes))
                        ON CONFLICT(uid) DO UPDATE SET items = items + 1, bytes = bytes + LENGTH(NEW.ciphertext) + LENGTH(NEW.attributes);
                    END;
                    CREATE TRIGGER item_usage_delete AFTER DELETE ON item BEGIN
                        UPDATE item_usage SET items = items - 1, bytes = bytes - LENGTH(OLD.ciphertext) - LENGTH(OLD.attributes) WHERE uid = OLD.uid;
                    END;
                    CREATE TRIGGER item_usage_update AFTER UPDATE OF ciphertext, attributes ON item BEGIN
                        UPDATE item_usage SET bytes = bytes - LENGTH(OLD.ciphertext) - LENGTH(OLD.attributes)
                            + LENGTH(NEW.ciphertext) + LENGTH(NEW.attributes) WHERE uid = NEW.uid;
                    END;
                    """
            )
        }
        migrator.registerMigration("v8-application-password-attempts") { db in
            // Wrong application passwords per item (`PasswordAttempts`), gone with the item.
            try db.execute(
                sql: """
                    CREATE TABLE item_password_attempts (
                        item INTEGER PRIMARY KEY REFERENCES item(id) ON DELETE CASCADE,
                        failures INTEGER NOT NULL,
                        delayStarted REAL)
                    """
            )
        }
        migrator.registerMigration("v9-key-hierarchy") { db in
            // Random class keys per user, stored wrapped (`KeyHierarchy`); a record per Secure
            // Enclave key holding its own key; revoked blobs from before records, by digest.
            // Items record how their key is wrapped (1: under the key the master key derives,
            // rewrapped at start by `upgradeSealing`; 2: under their class key) and the key they hold.
            try db.execute(
                sql: """
                    CREATE TABLE class_key (uid INTEGER NOT NULL, class TEXT NOT NULL, wrapped BLOB NOT NULL, PRIMARY KEY (uid, class));
                    CREATE TABLE enclave_key (
                        handle BLOB PRIMARY KEY,
                        uid INTEGER NOT NULL,
                        app TEXT NOT NULL,
                        class TEXT NOT NULL,
                        wrapped BLOB NOT NULL,
                        created REAL NOT NULL
                    );
                    CREATE INDEX enclave_key_uid ON enclave_key(uid, class);
                    CREATE TABLE revoked_key (handle BLOB PRIMARY KEY, uid INTEGER NOT NULL);
                    ALTER TABLE item ADD COLUMN sealVersion INTEGER NOT NULL DEFAULT 1;
                    ALTER TABLE item ADD COLUMN heldKey BLOB;
                    CREATE INDEX item_legacy_seal ON item(id) WHERE sealVersion = 1;
                    CREATE TRIGGER item_held_key_delete AFTER DELETE ON item WHEN OLD.heldKey IS NOT NULL BEGIN
                        DELETE FROM enclave_key WHERE handle = OLD.heldKey;
                        INSERT OR IGNORE INTO revoked_key (handle, uid) SELECT OLD.heldKey, OLD.uid WHERE LENGTH(OLD.heldKey) = 32;
                    END;
                    """
            )
        }
        migrator.registerMigration("v10-one-not-synchronizable") { db in
            // Primary keys said "sync=b:0" or "sync=i:0" apart from an absent sync; now all are one
            // (`StoredItem.primaryKey`). Two items that were kept apart that way stay as they are.
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT \(Self.itemColumns) FROM item WHERE primaryKey LIKE '%sync=_:%'"
            )
            for row in rows {
                let item = try Self.item(from: row)
                guard item.primaryKey != row[ItemColumn.primaryKey.rawValue] else { continue }
                do {
                    try db.execute(
                        sql: "UPDATE item SET primaryKey = ? WHERE id = ?",
                        arguments: [item.primaryKey, item.id]
                    )
                } catch let e as DatabaseError where e.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {}
            }
        }
        migrator.registerMigration("v11-login-password-attempts") { db in
            try db.execute(sql: "ALTER TABLE user ADD COLUMN loginPasswordAttempts BLOB")
        }
        migrator.registerMigration("v12-enrolment-changed-elsewhere") { db in
            try db.execute(sql: "ALTER TABLE user ADD COLUMN enrolmentChangedElsewhereAt REAL")
        }
        migrator.registerMigration("v13-synchronizable-column") { db in
            // Whether an item is synchronizable, as a column: a look-up matches it in SQL and reads
            // no item's attributes when its query asks nothing more of them.
            try db.execute(sql: "ALTER TABLE item ADD COLUMN synchronizable INTEGER NOT NULL DEFAULT 0")
            // A row whose attributes no longer decode stays not synchronizable (said in the log)
            // rather than keep the daemon from starting.
            var undecodable = 0
            let rows = try Row.fetchCursor(db, sql: "SELECT id, attributes FROM item")
            while let row = try rows.next() {
                guard let data = row["attributes"] as Data?, let attributes = try? Self.attributes(from: data) else {
                    undecodable += 1
                    continue
                }
                if KeychainRules.isSynchronizable(attributes["sync"]) {
                    try db.execute(
                        sql: "UPDATE item SET synchronizable = 1 WHERE id = ?",
                        arguments: [row["id"] as Int64]
                    )
                }
            }
            if undecodable > 0 {
                logger.error(
                    "keychain items whose attributes do not decode are taken as not synchronizable",
                    metadata: ["items": "\(undecodable)"]
                )
            }
        }
        try migrator.migrate(pool)
    }

    /// After a deletion: checkpoints the WAL into the database and truncates it, so the page
    /// images written before the deletion (which `secure_delete` cannot reach) are gone from the
    /// disk's files too. A reader in the WAL for longer than the busy timeout leaves that to the
    /// next deletion or start, said in the log.
    func shred() {
        do {
            try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        } catch {
            logger.notice(
                "the WAL could not be truncated after a deletion; the next deletion or start does it",
                metadata: ["error": "\(error)"]
            )
        }
    }

    private static let encoder = JSONEncoder()
    private static let decoder = JSONDecoder()

    func loadUser(_ uid: UInt32) throws -> UserRecord? {
        try pool.read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM user WHERE uid = ?", arguments: [Int64(uid)])
            else { return nil }
            var r = UserRecord(uid: uid, domainSecret: row["domainSecret"])
            r.ledger = try Self.decoder.decode(AttemptLedger.self, from: row["ledger"] as Data)
            if let p: Data = row["passcode"] { r.passcode = try Self.decoder.decode(PasscodeVerifier.self, from: p) }
            r.enrolmentGeneration = UInt64(row["enrolmentGeneration"] as Int64)
            r.enrolment = try Self.decoder.decode([String].self, from: row["enrolment"] as Data)
            r.passcodeEpoch = UInt64(row["passcodeEpoch"] as Int64)
            if let attempts: Data = row["loginPasswordAttempts"] {
                r.loginPasswordAttempts = try Self.decoder.decode(PasswordAttempts.self, from: attempts)
            }
            r.enrolmentChangedElsewhereAt = (row["enrolmentChangedElsewhereAt"] as Double?).map(
                Date.init(timeIntervalSince1970:)
            )
            return r
        }
    }

    /// One durable transaction, on the caller's thread.
    func transaction<T>(_ body: (Database) throws -> T) throws -> T { try pool.write(body) }

    /// Writes the record, and the audit entries that go with its change, in one durable transaction.
    func save(_ r: UserRecord, audit: [AuditEntry] = []) throws {
        try pool.write { db in try Self.write(r, audit: audit, db) }
    }

    /// The record and its audit entries, inside the caller's transaction.
    static func write(_ r: UserRecord, audit: [AuditEntry], _ db: Database) throws {
        let ledger = try Self.encoder.encode(r.ledger)
        let passcode = try r.passcode.map { try Self.encoder.encode($0) }
        let enrolment = try Self.encoder.encode(r.enrolment)
        let loginAttempts =
            r.loginPasswordAttempts.failures == 0 ? nil : try Self.encoder.encode(r.loginPasswordAttempts)
        try db.execute(
            sql: """
                INSERT INTO user (uid, ledger, passcode, domainSecret, enrolmentGeneration, enrolment, passcodeEpoch, loginPasswordAttempts,
                                  enrolmentChangedElsewhereAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(uid) DO UPDATE SET ledger = excluded.ledger, passcode = excluded.passcode,
                    domainSecret = excluded.domainSecret, enrolmentGeneration = excluded.enrolmentGeneration,
                    enrolment = excluded.enrolment, passcodeEpoch = excluded.passcodeEpoch,
                    loginPasswordAttempts = excluded.loginPasswordAttempts, enrolmentChangedElsewhereAt = excluded.enrolmentChangedElsewhereAt
                """,
            arguments: [
                Int64(r.uid), ledger, passcode, r.domainSecret, Int64(r.enrolmentGeneration), enrolment,
                Int64(r.passcodeEpoch),
                loginAttempts, r.enrolmentChangedElsewhereAt?.timeIntervalSince1970,
            ]
        )
        try Self.insert(audit, db)
    }

    func appendAudit(_ entries: [AuditEntry]) throws {
        try pool.write { db in try Self.insert(entries, db) }
    }

    private static func insert(_ entries: [AuditEntry], _ db: Database) throws {
        guard !entries.isEmpty else { return }
        let statement = try db.cachedStatement(
            sql: "INSERT INTO audit (time, uid, pid, app, operation, policy, result) VALUES (?, ?, ?, ?, ?, ?, ?)"
        )
        for e in entries {
            try statement.execute(arguments: [
                e.time.timeIntervalSince1970, Int64(e.uid), Int64(e.pid), e.app, e.operation, e.policy, e.result,
            ])
        }
    }

    /// The newest entries first; `uid` nil means every user (root in system mode), `app` nil every app.
    func audit(uid: UInt32?, app: String?, limit: Int) throws -> [AuditEntry] {
        try pool.read { db in
            var sql = "SELECT * FROM audit"
            var arguments: StatementArguments = []
            var conditions: [String] = []
            if let uid {
                conditions.append("uid = ?")
                arguments += [Int64(uid)]
            }
            if let app {
                conditions.append("app = ?")
                arguments += [app]
            }
            if !conditions.isEmpty { sql += " WHERE " + conditions.joined(separator: " AND ") }
            sql += " ORDER BY id DESC LIMIT ?"
            arguments += [limit]
            let rows = try Row.fetchAll(db, sql: sql, arguments: arguments)
            return rows.map { row in
                AuditEntry(
                    time: Date(timeIntervalSince1970: row["time"]),
                    uid: UInt32(row["uid"] as Int64),
                    pid: Int32(row["pid"] as Int64),
                    app: row["app"],
                    operation: row["operation"],
                    policy: row["policy"],
                    result: row["result"]
                )
            }
        }
    }
}
