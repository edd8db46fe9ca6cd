import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB

/// A state directory as the daemon wrote it before class keys and key records (schema v1…v8):
/// items with their keys wrapped under the key the master key derives per user, Secure Enclave
/// keys as stateless `LAK1` blobs under that same key. Frozen here, as written then, so that the
/// upgrade is tested against the old format and not against whatever the code writes today.
struct LegacyState {
    let queue: DatabaseQueue
    let master: SymmetricKey
    let uid: UInt32
    let app: String
    private var legacyKey: SymmetricKey { ItemSealing.legacyUserKey(master: master, uid: uid) }

    init(directory: String, master: SymmetricKey, uid: UInt32, app: String) throws {
        try FileManager.default.createDirectory(
            atPath: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        var configuration = Configuration()
        // As a SQLite built without secure_delete left it: deleted rows stay in free pages.
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA secure_delete = OFF")
        }
        queue = try DatabaseQueue(path: directory + "/enclave.sqlite", configuration: configuration)
        self.master = master
        self.uid = uid
        self.app = app
        try queue.write { db in
            try db.execute(sql: Self.schema)
            let check = Data(
                HMAC<SHA256>.authenticationCode(for: Data("laenclaved master key check".utf8), using: master)
            )
            try db.execute(sql: "INSERT INTO meta (name, value) VALUES ('masterKeyCheck', ?)", arguments: [check])
        }
    }

    func setUser(passcode: String) throws {
        let verifier = try JSONEncoder().encode(PasscodeVerifier.make(passcode: passcode, cost: 10, minimumLength: 4))
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO user (uid, ledger, passcode, domainSecret, enrolmentGeneration, enrolment, passcodeEpoch)
                    VALUES (?, ?, ?, ?, 0, ?, 0)
                    """,
                arguments: [
                    Int64(uid), try JSONEncoder().encode(AttemptLedger()), verifier, Data(repeating: 3, count: 32),
                    Data("[]".utf8),
                ]
            )
        }
    }

    /// A stateless Secure Enclave key blob, as `dataRepresentation` carried it.
    func keyBlob(_ key: P256.Signing.PrivateKey, kind: KeyRequest.Kind, flags: AccessControlFlags) throws -> Data {
        let payload = try JSONEncoder().encode(
            KeyBlob(
                kind: kind,
                privateKey: key.rawRepresentation,
                protection: .whenUnlockedThisDeviceOnly,
                flags: flags,
                enrolmentGeneration: 0,
                passcodeEpoch: 0
            )
        )
        let aad = Data("secure-enclave-key\u{1F}\(uid)\u{1F}\(app)".utf8)
        return Data("LAK1".utf8) + (try AES.GCM.seal(payload, using: legacyKey, authenticating: aad).combined!)
    }

    /// Adds an item of the app's own group; answers its sealed key as stored.
    @discardableResult
    func addItem(
        class itemClass: String,
        primaryKey: String,
        attributes given: [String: KeychainValue],
        secret: Data,
        protection: Protection,
        flags: AccessControlFlags = []
    ) throws -> Data {
        let persistentRef = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        let now = Date()
        var attributes = given
        attributes["class"] = .string(itemClass)
        attributes["agrp"] = .string(app)
        attributes["pdmn"] = .string(protection.rawValue)
        attributes["cdat"] = .date(now)
        attributes["mdat"] = .date(now)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        let identity =
            Data(
                "\(uid)\u{1F}\(app)\u{1F}\(itemClass)\u{1F}\(protection.rawValue)\u{1F}\(flags.rawValue)\u{1F}0\u{1F}"
                    .utf8
            ) + persistentRef
        let sealed = try ItemSealing.seal(secret, key: legacyKey, identity: identity)
        func string(_ key: String) -> String? {
            if case .string(let s)? = attributes[key] { return s }
            return nil
        }
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO item (uid, accessGroup, class, primaryKey, service, account, server, attributes, protection, flags,
                                      enrolmentGeneration, wrappedKey, ciphertext, passwordSalt, persistentRef, created, modified)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, NULL, ?, ?, ?)
                    """,
                arguments: [
                    Int64(uid), app, itemClass, primaryKey, string("svce"), string("acct"), string("srvr"),
                    try encoder.encode(attributes), protection.rawValue, Int64(bitPattern: flags.rawValue),
                    sealed.wrappedKey, sealed.ciphertext, persistentRef, now.timeIntervalSince1970,
                    now.timeIntervalSince1970,
                ]
            )
        }
        return sealed.wrappedKey
    }

    /// Deletes the item of `account` as the old daemon did (a plain DELETE).
    func deleteItem(account: String) throws {
        try queue.write { db in try db.execute(sql: "DELETE FROM item WHERE account = ?", arguments: [account]) }
    }

    /// The tables as migrations v1 to v8 left them, and GRDB's record that they ran.
    private static let schema = """
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        INSERT INTO grdb_migrations VALUES ('v1'), ('v2-keychain'), ('v3-account-index'), ('v4-access-groups'), ('v5-passcode-epoch'),
            ('v6-meta'), ('v7-bounded-per-user'), ('v8-application-password-attempts');
        CREATE TABLE user (uid INTEGER PRIMARY KEY, ledger BLOB NOT NULL, passcode BLOB, domainSecret BLOB NOT NULL,
            enrolmentGeneration INTEGER NOT NULL, enrolment BLOB NOT NULL, passcodeEpoch INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, uid INTEGER NOT NULL, pid INTEGER NOT NULL,
            app TEXT NOT NULL, operation TEXT NOT NULL, policy INTEGER, result TEXT NOT NULL);
        CREATE INDEX audit_uid ON audit(uid, id);
        CREATE TABLE item (id INTEGER PRIMARY KEY AUTOINCREMENT, uid INTEGER NOT NULL, accessGroup TEXT NOT NULL, class TEXT NOT NULL,
            primaryKey TEXT NOT NULL, service TEXT, account TEXT, server TEXT, attributes BLOB NOT NULL, protection TEXT NOT NULL,
            flags INTEGER NOT NULL, enrolmentGeneration INTEGER NOT NULL, wrappedKey BLOB NOT NULL, ciphertext BLOB NOT NULL,
            passwordSalt BLOB, persistentRef BLOB NOT NULL UNIQUE, created REAL NOT NULL, modified REAL NOT NULL,
            UNIQUE (uid, accessGroup, class, primaryKey));
        CREATE INDEX item_lookup ON item(uid, accessGroup, class, service, account);
        CREATE INDEX item_server ON item(uid, accessGroup, class, server);
        CREATE INDEX item_account ON item(uid, accessGroup, class, account);
        CREATE TABLE access_group (uid INTEGER NOT NULL, name TEXT NOT NULL, app TEXT NOT NULL, PRIMARY KEY (uid, name, app));
        CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
        CREATE TABLE item_usage (uid INTEGER PRIMARY KEY, items INTEGER NOT NULL, bytes INTEGER NOT NULL);
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
        CREATE TRIGGER audit_rotation AFTER INSERT ON audit WHEN NEW.id % 256 = 0 BEGIN
            DELETE FROM audit WHERE uid = NEW.uid AND id <= (SELECT id FROM audit WHERE uid = NEW.uid ORDER BY id DESC LIMIT 1 OFFSET 10000);
        END;
        CREATE TABLE item_password_attempts (item INTEGER PRIMARY KEY REFERENCES item(id) ON DELETE CASCADE, failures INTEGER NOT NULL,
            delayStarted REAL);
        """
}
