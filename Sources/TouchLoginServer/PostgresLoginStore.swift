import Foundation
import Logging
import PostgresNIO

/// The shared store for several server instances: PostgreSQL through postgres-nio. The client
/// must be running (it is a Service: the server runs it beside the HTTP server).
public final class PostgresLoginStore: LoginStore {
    public let kind = "postgresql"
    public let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger = Logger(label: "touchlogin-server.postgres")) {
        self.client = client
        self.logger = logger
    }

    /// `postgres://user:password@host:port/database`, or `postgres:///database?host=/run/postgresql&user=…` for a Unix socket.
    /// `logger` hears the pool's own troubles (a connection refused, a certificate not trusted),
    /// which a query only waits through.
    public static func client(url text: String, logger: Logger? = nil) throws -> PostgresClient {
        let configuration = try PostgresURL(text).clientConfiguration()
        guard let logger else { return PostgresClient(configuration: configuration) }
        return PostgresClient(configuration: configuration, backgroundLogger: logger)
    }

    public func migrate() async throws {
        try await client.withTransaction(logger: logger) { connection in
            // Instances starting together migrate one at a time.
            try await connection.query("SELECT pg_advisory_xact_lock(7242024)", logger: logger)
            for statement in [
                "CREATE TABLE IF NOT EXISTS account (id TEXT PRIMARY KEY, username TEXT NOT NULL UNIQUE, password_hash TEXT NOT NULL, user_handle BYTEA NOT NULL UNIQUE, created_at DOUBLE PRECISION NOT NULL)",
                "CREATE TABLE IF NOT EXISTS session (token_hash BYTEA PRIMARY KEY, account_id TEXT NOT NULL REFERENCES account(id) ON DELETE CASCADE, created_at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION NOT NULL, method TEXT NOT NULL)",
                "CREATE TABLE IF NOT EXISTS challenge (value BYTEA PRIMARY KEY, purpose TEXT NOT NULL, account_id TEXT, session_token_hash BYTEA, device_name TEXT, expires_at DOUBLE PRECISION NOT NULL)",
                "CREATE TABLE IF NOT EXISTS credential (id BYTEA PRIMARY KEY, account_id TEXT NOT NULL REFERENCES account(id) ON DELETE CASCADE, public_key BYTEA NOT NULL, sign_count BIGINT NOT NULL, name TEXT NOT NULL, attestation_format TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, last_used_at DOUBLE PRECISION)",
                "CREATE INDEX IF NOT EXISTS credential_account ON credential(account_id)",
                // Step-up, failure schedules instead of fixed windows, indexed expiry, the decoy secret.
                "ALTER TABLE session ADD COLUMN IF NOT EXISTS password_verified_at DOUBLE PRECISION",
                "ALTER TABLE session ADD COLUMN IF NOT EXISTS credential_id BYTEA",
                "CREATE INDEX IF NOT EXISTS session_expiry ON session(expires_at)",
                "CREATE INDEX IF NOT EXISTS challenge_expiry ON challenge(expires_at)",
                "DROP TABLE IF EXISTS rate_event",
                "CREATE TABLE IF NOT EXISTS login_failure (key TEXT PRIMARY KEY, failures INTEGER NOT NULL, last_failure_at DOUBLE PRECISION NOT NULL)",
                "CREATE INDEX IF NOT EXISTS login_failure_idle ON login_failure(last_failure_at)",
                "CREATE TABLE IF NOT EXISTS server_secret (name TEXT PRIMARY KEY, value BYTEA NOT NULL)",
                // Login challenges are signed, not stored: only the nonces of used ones are kept.
                "CREATE TABLE IF NOT EXISTS used_challenge (nonce BYTEA PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL)",
                "CREATE INDEX IF NOT EXISTS used_challenge_expiry ON used_challenge(expires_at)",
                "ALTER TABLE credential ADD COLUMN IF NOT EXISTS aaguid BYTEA NOT NULL DEFAULT '\\x00000000000000000000000000000000'",
                "ALTER TABLE credential ADD COLUMN IF NOT EXISTS transports TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE credential ADD COLUMN IF NOT EXISTS flags INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE credential ADD COLUMN IF NOT EXISTS attested_key TEXT",
                "CREATE TABLE IF NOT EXISTS account_event (id BIGSERIAL PRIMARY KEY, account_id TEXT NOT NULL REFERENCES account(id) ON DELETE CASCADE, at DOUBLE PRECISION NOT NULL, kind TEXT NOT NULL, credential_id BYTEA, device_name TEXT, address TEXT NOT NULL)",
                "CREATE INDEX IF NOT EXISTS account_event_account ON account_event(account_id, at)",
                "CREATE INDEX IF NOT EXISTS account_event_at ON account_event(at)",
            ] {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
        }
    }

    public func ping() async throws {
        try await client.query("SELECT 1", logger: logger)
    }

    public func createAccount(_ a: Account) async throws {
        try await unique {
            try await client.query(
                "INSERT INTO account (id, username, password_hash, user_handle, created_at) VALUES (\(a.id), \(a.username), \(a.passwordHash), \(a.userHandle), \(a.createdAt))",
                logger: logger
            )
        }
    }

    public func account(named username: String) async throws -> Account? {
        try await accounts(
            client.query(
                "SELECT id, username, password_hash, user_handle, created_at FROM account WHERE username = \(username)",
                logger: logger
            )
        )
    }

    public func account(named username: String, standIn: Account) async throws -> Account {
        try await accounts(
            client.query(
                """
                SELECT COALESCE(a.id, \(standIn.id)), COALESCE(a.username, \(username)), COALESCE(a.password_hash, \(standIn.passwordHash)),
                       COALESCE(a.user_handle, \(standIn.userHandle)), COALESCE(a.created_at, \(standIn.createdAt))
                FROM (SELECT \(username)::text AS username) AS asked LEFT JOIN account a ON a.username = asked.username
                """,
                logger: logger
            )
        ) ?? standIn
    }

    public func account(id: String) async throws -> Account? {
        try await accounts(
            client.query(
                "SELECT id, username, password_hash, user_handle, created_at FROM account WHERE id = \(id)",
                logger: logger
            )
        )
    }

    func accounts(_ rows: PostgresRowSequence) async throws -> Account? {
        for try await (id, username, hash, handle, created) in rows.decode((String, String, String, Data, Double).self)
        {
            return Account(id: id, username: username, passwordHash: hash, userHandle: handle, createdAt: created)
        }
        return nil
    }

    public func createSession(_ s: Session, event: AccountEvent) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query(
                """
                INSERT INTO session (token_hash, account_id, created_at, expires_at, method, password_verified_at, credential_id)
                VALUES (\(s.tokenHash), \(s.accountID), \(s.createdAt), \(s.expiresAt), \(s.method), \(s.passwordVerifiedAt), \(s.credentialID))
                """,
                logger: logger
            )
            try await Self.insert(event, connection, logger)
        }
    }

    static func insert(_ e: AccountEvent, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO account_event (account_id, at, kind, credential_id, device_name, address)
            VALUES (\(e.accountID), \(e.at), \(e.kind.rawValue), \(e.credentialID), \(e.deviceName), \(e.address))
            """,
            logger: logger
        )
    }

    public func events(accountID: String, limit: Int) async throws -> [AccountEvent] {
        let rows = try await client.query(
            """
            SELECT account_id, at, kind, credential_id, device_name, address FROM account_event
            WHERE account_id = \(accountID) ORDER BY at DESC, id DESC LIMIT \(Int64(limit))
            """,
            logger: logger
        )
        var found: [AccountEvent] = []
        for try await (account, at, kind, credential, device, address) in rows.decode(
            (String, Double, String, Data?, String?, String).self
        ) {
            guard let kind = AccountEvent.Kind(rawValue: kind) else { continue }
            found.append(
                AccountEvent(
                    accountID: account,
                    at: at,
                    kind: kind,
                    credentialID: credential,
                    deviceName: device,
                    address: address
                )
            )
        }
        return found
    }

    public func session(tokenHash: Data) async throws -> Session? {
        let rows = try await client.query(
            "SELECT token_hash, account_id, created_at, expires_at, method, password_verified_at, credential_id FROM session WHERE token_hash = \(tokenHash)",
            logger: logger
        )
        for try await (hash, account, created, expires, method, verified, credential) in rows.decode(
            (Data, String, Double, Double, String, Double?, Data?).self
        ) {
            return Session(
                tokenHash: hash,
                accountID: account,
                createdAt: created,
                expiresAt: expires,
                method: method,
                passwordVerifiedAt: verified,
                credentialID: credential
            )
        }
        return nil
    }

    public func deleteSession(tokenHash: Data) async throws {
        try await client.query("DELETE FROM session WHERE token_hash = \(tokenHash)", logger: logger)
    }

    public func changePassword(
        accountID: String,
        hash: String,
        keepingSession tokenHash: Data,
        verifiedAt: Double,
        clearingFailures key: String,
        event: AccountEvent
    ) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query(
                "UPDATE account SET password_hash = \(hash) WHERE id = \(accountID)",
                logger: logger
            )
            try await connection.query(
                "DELETE FROM session WHERE account_id = \(accountID) AND token_hash != \(tokenHash)",
                logger: logger
            )
            try await connection.query(
                "UPDATE session SET password_verified_at = \(verifiedAt) WHERE token_hash = \(tokenHash)",
                logger: logger
            )
            try await connection.query("DELETE FROM login_failure WHERE key = \(key)", logger: logger)
            try await Self.insert(event, connection, logger)
        }
    }

    public func rehashPassword(accountID: String, from old: String, to new: String) async throws -> Bool {
        let rows = try await client.query(
            "UPDATE account SET password_hash = \(new) WHERE id = \(accountID) AND password_hash = \(old) RETURNING id",
            logger: logger
        )
        for try await _ in rows { return true }
        return false
    }

    public func markPasswordVerified(tokenHash: Data, at time: Double) async throws {
        try await client.query(
            "UPDATE session SET password_verified_at = \(time) WHERE token_hash = \(tokenHash)",
            logger: logger
        )
    }

    public func storeChallenge(_ c: Challenge) async throws {
        try await client.query(
            "INSERT INTO challenge (value, purpose, account_id, session_token_hash, device_name, expires_at) VALUES (\(c.value), \(c.purpose.rawValue), \(c.accountID), \(c.sessionTokenHash), \(c.deviceName), \(c.expiresAt))",
            logger: logger
        )
    }

    public func takeChallenge(_ value: Data) async throws -> Challenge? {
        let rows = try await client.query(
            "DELETE FROM challenge WHERE value = \(value) RETURNING value, purpose, account_id, session_token_hash, device_name, expires_at",
            logger: logger
        )
        for try await (v, purpose, account, session, device, expires) in rows.decode(
            (Data, String, String?, Data?, String?, Double).self
        ) {
            guard let p = Challenge.Purpose(rawValue: purpose) else { return nil }
            return Challenge(
                value: v,
                purpose: p,
                accountID: account,
                sessionTokenHash: session,
                deviceName: device,
                expiresAt: expires
            )
        }
        return nil
    }

    public func admitAttempt(
        keys: [String],
        at now: Double,
        decide: @escaping @Sendable ([String: FailureRecord]) -> ThrottleDecision
    ) async throws -> ThrottleDecision {
        try await client.withTransaction(logger: logger) { connection in
            // The rows may not exist yet: a transaction-scoped advisory lock per key serialises
            // instances deciding on the same key (hashtextextended: 64 bits of the key).
            for key in keys.sorted() {
                try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(key), 0))", logger: logger)
            }
            var records: [String: FailureRecord] = [:]
            let rows = try await connection.query(
                "SELECT key, failures, last_failure_at FROM login_failure WHERE key = ANY(\(keys))",
                logger: logger
            )
            for try await (key, failures, last) in rows.decode((String, Int32, Double).self) {
                records[key] = FailureRecord(failures: Int(failures), lastFailureAt: last)
            }
            let decision = decide(records)
            guard decision == .admitted else { return decision }
            for key in keys {
                try await connection.query(
                    """
                    INSERT INTO login_failure (key, failures, last_failure_at) VALUES (\(key), 1, \(now))
                    ON CONFLICT (key) DO UPDATE SET failures = login_failure.failures + 1, last_failure_at = EXCLUDED.last_failure_at
                    """,
                    logger: logger
                )
            }
            return decision
        }
    }

    public func clearFailures(keys: [String]) async throws {
        try await client.query("DELETE FROM login_failure WHERE key = ANY(\(keys))", logger: logger)
    }

    public func clearFailures(keysStartingWith prefix: String) async throws {
        try await client.query("DELETE FROM login_failure WHERE starts_with(key, \(prefix))", logger: logger)
    }

    public func removeExpired(now: Double, failuresIdleSince: Double, lockAt: Int?, eventsBefore: Double) async throws {
        try await client.query("DELETE FROM account_event WHERE at < \(eventsBefore)", logger: logger)
        try await client.query("DELETE FROM session WHERE expires_at < \(now)", logger: logger)
        try await client.query("DELETE FROM challenge WHERE expires_at < \(now)", logger: logger)
        try await client.query("DELETE FROM used_challenge WHERE expires_at < \(now)", logger: logger)
        try await client.query(
            "DELETE FROM login_failure WHERE last_failure_at < \(failuresIdleSince) AND failures < \(Int32(clamping: lockAt ?? Int(Int32.max)))",
            logger: logger
        )
    }

    public func secret() async throws -> Data {
        try await client.query(
            "INSERT INTO server_secret (name, value) VALUES ('decoy', \(LoginService.random(32))) ON CONFLICT (name) DO NOTHING",
            logger: logger
        )
        let rows = try await client.query("SELECT value FROM server_secret WHERE name = 'decoy'", logger: logger)
        for try await value in rows.decode(Data.self) { return value }
        return Data()
    }

    func unique(_ body: () async throws -> Void) async throws {
        do { try await body() } catch let e as PSQLError
            where e.serverInfo?[.sqlState] == PostgresError.Code.uniqueViolation.raw
        {
            throw LoginServerError.duplicate
        }
    }
}
