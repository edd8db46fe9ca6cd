import DurableSQLite
import Foundation
import GRDB

/// The embedded store: one SQLite file in WAL mode, every commit durable (synchronous=FULL)
/// before the answer leaves — a sign counter that rolled back would let an assertion be replayed.
/// Writes go through one batching writer (`GroupCommit`): concurrent logins share a commit.
public final class SQLiteLoginStore: LoginStore {
    public let kind = "sqlite"
    let pool: DatabasePool
    let writer: GroupCommit

    public init(path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try FileManager.default.createDirectory(
                atPath: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        // A sign counter that rolled back would let an assertion be replayed (`SQLiteLoginStoreTests`).
        pool = try DurablePool.open(path: path, configuration: configuration, keeping: "sign counters")
        writer = GroupCommit(pool: pool)
    }

    public func migrate() async throws {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE account (
                        id TEXT PRIMARY KEY, username TEXT NOT NULL UNIQUE, password_hash TEXT NOT NULL,
                        user_handle BLOB NOT NULL UNIQUE, created_at REAL NOT NULL);
                    CREATE TABLE session (
                        token_hash BLOB PRIMARY KEY, account_id TEXT NOT NULL REFERENCES account(id) ON DELETE CASCADE,
                        created_at REAL NOT NULL, expires_at REAL NOT NULL, method TEXT NOT NULL);
                    CREATE TABLE challenge (
                        value BLOB PRIMARY KEY, purpose TEXT NOT NULL, account_id TEXT, session_token_hash BLOB,
                        device_name TEXT, expires_at REAL NOT NULL);
                    CREATE TABLE credential (
                        id BLOB PRIMARY KEY, account_id TEXT NOT NULL REFERENCES account(id) ON DELETE CASCADE,
                        public_key BLOB NOT NULL, sign_count INTEGER NOT NULL, name TEXT NOT NULL,
                        attestation_format TEXT NOT NULL, created_at REAL NOT NULL, last_used_at REAL);
                    CREATE INDEX credential_account ON credential(account_id);
                    CREATE TABLE rate_event (key TEXT PRIMARY KEY, window_start REAL NOT NULL, count INTEGER NOT NULL);
                    """
            )
        }
        migrator.registerMigration("v2") { db in
            // Step-up, failure schedules instead of fixed windows, indexed expiry, the decoy secret.
            try db.execute(
                sql: """
                    ALTER TABLE session ADD COLUMN password_verified_at REAL;
                    ALTER TABLE session ADD COLUMN credential_id BLOB;
                    UPDATE session SET password_verified_at = created_at WHERE method = 'password';
                    CREATE INDEX session_expiry ON session(expires_at);
                    CREATE INDEX challenge_expiry ON challenge(expires_at);
                    DROP TABLE rate_event;
                    CREATE TABLE login_failure (key TEXT PRIMARY KEY, failures INTEGER NOT NULL, last_failure_at REAL NOT NULL);
                    CREATE INDEX login_failure_idle ON login_failure(last_failure_at);
                    CREATE TABLE server_secret (name TEXT PRIMARY KEY, value BLOB NOT NULL);
                    """
            )
        }
        migrator.registerMigration("v3") { db in
            // Login challenges are signed, not stored: only the nonces of used ones are kept.
            try db.execute(
                sql: """
                    CREATE TABLE used_challenge (nonce BLOB PRIMARY KEY, expires_at REAL NOT NULL);
                    CREATE INDEX used_challenge_expiry ON used_challenge(expires_at);
                    """
            )
        }
        migrator.registerMigration("v4") { db in
            try db.execute(
                sql: """
                    CREATE TABLE account_event (
                        id INTEGER PRIMARY KEY AUTOINCREMENT, account_id TEXT NOT NULL REFERENCES account(id) ON DELETE CASCADE,
                        at REAL NOT NULL, kind TEXT NOT NULL, credential_id BLOB, device_name TEXT, address TEXT NOT NULL);
                    CREATE INDEX account_event_account ON account_event(account_id, at);
                    CREATE INDEX account_event_at ON account_event(at);
                    """
            )
        }
        migrator.registerMigration("v5") { db in
            // What the authenticator said of itself: AAGUID, transports, BE/BS/uvInitialized.
            try db.execute(
                sql: """
                    ALTER TABLE credential ADD COLUMN aaguid BLOB NOT NULL DEFAULT x'00000000000000000000000000000000';
                    ALTER TABLE credential ADD COLUMN transports TEXT NOT NULL DEFAULT '';
                    ALTER TABLE credential ADD COLUMN flags INTEGER NOT NULL DEFAULT 0;
                    """
            )
        }
        migrator.registerMigration("v6") { db in
            // What a trusted attestation said of the key (`AttestationTrust`), if one did.
            try db.execute(sql: "ALTER TABLE credential ADD COLUMN attested_key TEXT")
        }
        try migrator.migrate(pool)
    }

    public func ping() async throws {
        _ = try await pool.read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    public func createAccount(_ a: Account) async throws {
        do {
            try await writer.write { db in
                try db.execute(
                    cached:
                        "INSERT INTO account (id, username, password_hash, user_handle, created_at) VALUES (?, ?, ?, ?, ?)",
                    arguments: [a.id, a.username, a.passwordHash, a.userHandle, a.createdAt]
                )
            }
        } catch let e as DatabaseError where e.resultCode == .SQLITE_CONSTRAINT {
            throw LoginServerError.duplicate
        }
    }

    public func account(named username: String) async throws -> Account? {
        try await pool.read { db in
            try Row.fetchOne(db, cached: "SELECT * FROM account WHERE username = ?", arguments: [username]).map(
                Self.account
            )
        }
    }

    public func account(named username: String, standIn: Account) async throws -> Account {
        try await pool.read { db in
            let row = try Row.fetchOne(
                db,
                cached: """
                    SELECT COALESCE(account.id, ?2) AS id, COALESCE(account.username, ?1) AS username, COALESCE(account.password_hash, ?3) AS password_hash,
                           COALESCE(account.user_handle, ?4) AS user_handle, COALESCE(account.created_at, ?5) AS created_at
                    FROM (SELECT ?1 AS username) AS asked LEFT JOIN account ON account.username = asked.username
                    """,
                arguments: [username, standIn.id, standIn.passwordHash, standIn.userHandle, standIn.createdAt]
            )
            return row.map(Self.account) ?? standIn
        }
    }

    public func account(id: String) async throws -> Account? {
        try await pool.read { db in
            try Row.fetchOne(db, cached: "SELECT * FROM account WHERE id = ?", arguments: [id]).map(Self.account)
        }
    }

    static func account(_ row: Row) -> Account {
        Account(
            id: row["id"],
            username: row["username"],
            passwordHash: row["password_hash"],
            userHandle: row["user_handle"],
            createdAt: row["created_at"]
        )
    }

    public func createSession(_ s: Session, event: AccountEvent) async throws {
        try await writer.write { db in
            try Self.insert(s, db)
            try Self.insert(event, db)
        }
    }

    static func insert(_ e: AccountEvent, _ db: Database) throws {
        try db.execute(
            cached:
                "INSERT INTO account_event (account_id, at, kind, credential_id, device_name, address) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [e.accountID, e.at, e.kind.rawValue, e.credentialID, e.deviceName, e.address]
        )
    }

    public func events(accountID: String, limit: Int) async throws -> [AccountEvent] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                cached: "SELECT * FROM account_event WHERE account_id = ? ORDER BY at DESC, id DESC LIMIT ?",
                arguments: [accountID, limit]
            )
            .compactMap { row in
                AccountEvent.Kind(rawValue: row["kind"]).map {
                    AccountEvent(
                        accountID: row["account_id"],
                        at: row["at"],
                        kind: $0,
                        credentialID: row["credential_id"],
                        deviceName: row["device_name"],
                        address: row["address"]
                    )
                }
            }
        }
    }

    static func insert(_ s: Session, _ db: Database) throws {
        try db.execute(
            cached: """
                INSERT INTO session (token_hash, account_id, created_at, expires_at, method, password_verified_at, credential_id)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                s.tokenHash, s.accountID, s.createdAt, s.expiresAt, s.method, s.passwordVerifiedAt, s.credentialID,
            ]
        )
    }

    public func session(tokenHash: Data) async throws -> Session? {
        try await pool.read { db in
            try Row.fetchOne(db, cached: "SELECT * FROM session WHERE token_hash = ?", arguments: [tokenHash]).map {
                Session(
                    tokenHash: $0["token_hash"],
                    accountID: $0["account_id"],
                    createdAt: $0["created_at"],
                    expiresAt: $0["expires_at"],
                    method: $0["method"],
                    passwordVerifiedAt: $0["password_verified_at"],
                    credentialID: $0["credential_id"]
                )
            }
        }
    }

    public func deleteSession(tokenHash: Data) async throws {
        try await writer.write { db in
            try db.execute(cached: "DELETE FROM session WHERE token_hash = ?", arguments: [tokenHash])
        }
    }

    public func changePassword(
        accountID: String,
        hash: String,
        keepingSession tokenHash: Data,
        verifiedAt: Double,
        clearingFailures key: String,
        event: AccountEvent
    ) async throws {
        try await writer.write { db in
            try db.execute(cached: "UPDATE account SET password_hash = ? WHERE id = ?", arguments: [hash, accountID])
            try db.execute(
                cached: "DELETE FROM session WHERE account_id = ? AND token_hash != ?",
                arguments: [accountID, tokenHash]
            )
            try db.execute(
                cached: "UPDATE session SET password_verified_at = ? WHERE token_hash = ?",
                arguments: [verifiedAt, tokenHash]
            )
            try db.execute(cached: "DELETE FROM login_failure WHERE key = ?", arguments: [key])
            try Self.insert(event, db)
        }
    }

    public func rehashPassword(accountID: String, from old: String, to new: String) async throws -> Bool {
        try await writer.write { db in
            try db.execute(
                cached: "UPDATE account SET password_hash = ? WHERE id = ? AND password_hash = ?",
                arguments: [new, accountID, old]
            )
            return db.changesCount == 1
        }
    }

    public func markPasswordVerified(tokenHash: Data, at time: Double) async throws {
        try await writer.write { db in
            try db.execute(
                cached: "UPDATE session SET password_verified_at = ? WHERE token_hash = ?",
                arguments: [time, tokenHash]
            )
        }
    }

    public func storeChallenge(_ c: Challenge) async throws {
        try await writer.write { db in
            try db.execute(
                cached:
                    "INSERT INTO challenge (value, purpose, account_id, session_token_hash, device_name, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [c.value, c.purpose.rawValue, c.accountID, c.sessionTokenHash, c.deviceName, c.expiresAt]
            )
        }
    }

    public func takeChallenge(_ value: Data) async throws -> Challenge? {
        try await writer.write { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    cached: "DELETE FROM challenge WHERE value = ? RETURNING *",
                    arguments: [value]
                )
            else { return nil }
            guard let purpose = Challenge.Purpose(rawValue: row["purpose"]) else { return nil }
            return Challenge(
                value: row["value"],
                purpose: purpose,
                accountID: row["account_id"],
                sessionTokenHash: row["session_token_hash"],
                deviceName: row["device_name"],
                expiresAt: row["expires_at"]
            )
        }
    }

    public func admitAttempt(
        keys: [String],
        at now: Double,
        decide: @escaping @Sendable ([String: FailureRecord]) -> ThrottleDecision
    ) async throws -> ThrottleDecision {
        try await writer.write { db in
            var records: [String: FailureRecord] = [:]
            for key in keys {
                if let row = try Row.fetchOne(
                    db,
                    cached: "SELECT failures, last_failure_at FROM login_failure WHERE key = ?",
                    arguments: [key]
                ) {
                    records[key] = FailureRecord(failures: row["failures"], lastFailureAt: row["last_failure_at"])
                }
            }
            let decision = decide(records)
            guard decision == .admitted else { return decision }
            for key in keys {
                try db.execute(
                    cached: """
                        INSERT INTO login_failure (key, failures, last_failure_at) VALUES (?, 1, ?)
                        ON CONFLICT(key) DO UPDATE SET failures = failures + 1, last_failure_at = excluded.last_failure_at
                        """,
                    arguments: [key, now]
                )
            }
            return decision
        }
    }

    public func clearFailures(keys: [String]) async throws {
        try await writer.write { db in
            for key in keys { try db.execute(cached: "DELETE FROM login_failure WHERE key = ?", arguments: [key]) }
        }
    }

    public func clearFailures(keysStartingWith prefix: String) async throws {
        try await writer.write { db in
            // Not LIKE: '_', allowed in usernames, is one of its wildcards.
            try db.execute(sql: "DELETE FROM login_failure WHERE substr(key, 1, length(?1)) = ?1", arguments: [prefix])
        }
    }

    public func removeExpired(now: Double, failuresIdleSince: Double, lockAt: Int?, eventsBefore: Double) async throws {
        try await writer.write { db in
            try db.execute(cached: "DELETE FROM account_event WHERE at < ?", arguments: [eventsBefore])
            try db.execute(cached: "DELETE FROM session WHERE expires_at < ?", arguments: [now])
            try db.execute(cached: "DELETE FROM challenge WHERE expires_at < ?", arguments: [now])
            try db.execute(cached: "DELETE FROM used_challenge WHERE expires_at < ?", arguments: [now])
            try db.execute(
                cached: "DELETE FROM login_failure WHERE last_failure_at < ? AND failures < ?",
                arguments: [failuresIdleSince, lockAt ?? Int.max]
            )
        }
    }

    public func secret() async throws -> Data {
        try await writer.write { db in
            try db.execute(
                cached: "INSERT INTO server_secret (name, value) VALUES ('decoy', ?) ON CONFLICT(name) DO NOTHING",
                arguments: [LoginService.random(32)]
            )
            return try Data.fetchOne(db, sql: "SELECT value FROM server_secret WHERE name = 'decoy'") ?? Data()
        }
    }
}

// Every statement of the login path goes through the connection's statement cache: compiled (and
// run past GRDB's authorizer) once per connection instead of once per login.
extension Database {
    func execute(cached sql: String, arguments: StatementArguments = []) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}

extension Row {
    static func fetchOne(_ db: Database, cached sql: String, arguments: StatementArguments = []) throws -> Row? {
        try fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }

    static func fetchAll(_ db: Database, cached sql: String, arguments: StatementArguments = []) throws -> [Row] {
        try fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }
}
