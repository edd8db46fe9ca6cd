import Foundation
import Logging
import PostgresNIO

/// The shared store for several server instances: PostgreSQL through postgres-nio. The client
/// must be running (it is a Service: the server runs it beside the HTTP server).
public final class PostgresLoginStore: LoginStore {
    public let kind = "postgresql"
    public let client: PostgresClient
    private let logger: Logger

    public init(client: PostgresClient, logger: Logger = Logger(label: "touchlogin-server.postgres")) {
        self.client = client
        self.logger = logger
    }

    /// `postgres://user:password@host:port/database`, or `postgres:///database?host=/run/postgresql&user=…` for a Unix socket.
    public static func client(url text: String) throws -> PostgresClient {
        guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? "") else {
            throw LoginStoreConfigurationError("not a postgres:// URL")
        }
        let query = Dictionary((url.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, b in b })
        let database = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        let user = url.user ?? query["user"] ?? "postgres"
        if let socketDirectory = query["host"], socketDirectory.hasPrefix("/") {
            let port = url.port ?? 5432
            return PostgresClient(configuration: .init(unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user,
                                                       password: url.password, database: database.isEmpty ? nil : database))
        }
        return PostgresClient(configuration: .init(host: url.host ?? "localhost", port: url.port ?? 5432, username: user,
                                                   password: url.password, database: database.isEmpty ? nil : database, tls: .disable))
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
                "CREATE TABLE IF NOT EXISTS rate_event (key TEXT PRIMARY KEY, window_start DOUBLE PRECISION NOT NULL, count INTEGER NOT NULL)",
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
            try await client.query("INSERT INTO account (id, username, password_hash, user_handle, created_at) VALUES (\(a.id), \(a.username), \(a.passwordHash), \(a.userHandle), \(a.createdAt))", logger: logger)
        }
    }

    public func account(named username: String) async throws -> Account? {
        try await accounts(client.query("SELECT id, username, password_hash, user_handle, created_at FROM account WHERE username = \(username)", logger: logger))
    }

    public func account(id: String) async throws -> Account? {
        try await accounts(client.query("SELECT id, username, password_hash, user_handle, created_at FROM account WHERE id = \(id)", logger: logger))
    }

    private func accounts(_ rows: PostgresRowSequence) async throws -> Account? {
        for try await (id, username, hash, handle, created) in rows.decode((String, String, String, Data, Double).self) {
            return Account(id: id, username: username, passwordHash: hash, userHandle: handle, createdAt: created)
        }
        return nil
    }

    public func createSession(_ s: Session) async throws {
        try await client.query("DELETE FROM session WHERE expires_at < \(s.createdAt)", logger: logger)
        try await client.query("INSERT INTO session (token_hash, account_id, created_at, expires_at, method) VALUES (\(s.tokenHash), \(s.accountID), \(s.createdAt), \(s.expiresAt), \(s.method))", logger: logger)
    }

    public func session(tokenHash: Data) async throws -> Session? {
        let rows = try await client.query("SELECT token_hash, account_id, created_at, expires_at, method FROM session WHERE token_hash = \(tokenHash)", logger: logger)
        for try await (hash, account, created, expires, method) in rows.decode((Data, String, Double, Double, String).self) {
            return Session(tokenHash: hash, accountID: account, createdAt: created, expiresAt: expires, method: method)
        }
        return nil
    }

    public func deleteSession(tokenHash: Data) async throws {
        try await client.query("DELETE FROM session WHERE token_hash = \(tokenHash)", logger: logger)
    }

    public func storeChallenge(_ c: Challenge) async throws {
        let stale = Date().timeIntervalSince1970 - 3600
        try await client.query("DELETE FROM challenge WHERE expires_at < \(stale)", logger: logger)
        try await client.query("INSERT INTO challenge (value, purpose, account_id, session_token_hash, device_name, expires_at) VALUES (\(c.value), \(c.purpose.rawValue), \(c.accountID), \(c.sessionTokenHash), \(c.deviceName), \(c.expiresAt))", logger: logger)
    }

    public func takeChallenge(_ value: Data) async throws -> Challenge? {
        let rows = try await client.query("DELETE FROM challenge WHERE value = \(value) RETURNING value, purpose, account_id, session_token_hash, device_name, expires_at", logger: logger)
        for try await (v, purpose, account, session, device, expires) in rows.decode((Data, String, String?, Data?, String?, Double).self) {
            guard let p = Challenge.Purpose(rawValue: purpose) else { return nil }
            return Challenge(value: v, purpose: p, accountID: account, sessionTokenHash: session, deviceName: device, expiresAt: expires)
        }
        return nil
    }

    public func addCredential(_ c: Credential) async throws {
        try await unique {
            try await client.query("""
                INSERT INTO credential (id, account_id, public_key, sign_count, name, attestation_format, created_at, last_used_at)
                VALUES (\(c.id), \(c.accountID), \(c.publicKey), \(Int64(c.signCount)), \(c.name), \(c.attestationFormat), \(c.createdAt), \(c.lastUsedAt))
                """, logger: logger)
        }
    }

    public func credential(id: Data) async throws -> Credential? {
        try await credentials(client.query("SELECT id, account_id, public_key, sign_count, name, attestation_format, created_at, last_used_at FROM credential WHERE id = \(id)", logger: logger)).first
    }

    public func credentials(accountID: String) async throws -> [Credential] {
        try await credentials(client.query("SELECT id, account_id, public_key, sign_count, name, attestation_format, created_at, last_used_at FROM credential WHERE account_id = \(accountID) ORDER BY created_at", logger: logger))
    }

    private func credentials(_ rows: PostgresRowSequence) async throws -> [Credential] {
        var found: [Credential] = []
        for try await (id, account, key, count, name, format, created, used) in rows.decode((Data, String, Data, Int64, String, String, Double, Double?).self) {
            found.append(Credential(id: id, accountID: account, publicKey: key, signCount: UInt32(truncatingIfNeeded: count), name: name,
                                    attestationFormat: format, createdAt: created, lastUsedAt: used))
        }
        return found
    }

    public func advanceSignCount(credentialID: Data, expected: UInt32, newCount: UInt32, usedAt: Double) async throws -> Bool {
        let rows = try await client.query("UPDATE credential SET sign_count = \(Int64(newCount)), last_used_at = \(usedAt) WHERE id = \(credentialID) AND sign_count = \(Int64(expected)) RETURNING id", logger: logger)
        for try await _ in rows.decode(Data.self) { return true }
        return false
    }

    public func deleteCredential(id: Data, accountID: String) async throws -> Bool {
        let rows = try await client.query("DELETE FROM credential WHERE id = \(id) AND account_id = \(accountID) RETURNING id", logger: logger)
        for try await _ in rows.decode(Data.self) { return true }
        return false
    }

    public func countEvent(key: String, windowStart: Double) async throws -> Int {
        let rows = try await client.query("""
            INSERT INTO rate_event (key, window_start, count) VALUES (\(key), \(windowStart), 1)
            ON CONFLICT (key) DO UPDATE SET
                count = CASE WHEN rate_event.window_start = EXCLUDED.window_start THEN rate_event.count + 1 ELSE 1 END,
                window_start = EXCLUDED.window_start
            RETURNING count
            """, logger: logger)
        for try await count in rows.decode(Int32.self) { return Int(count) }
        return 1
    }

    public func eventCount(key: String, windowStart: Double) async throws -> Int {
        let rows = try await client.query("SELECT count FROM rate_event WHERE key = \(key) AND window_start = \(windowStart)", logger: logger)
        for try await count in rows.decode(Int32.self) { return Int(count) }
        return 0
    }

    private func unique(_ body: () async throws -> Void) async throws {
        do { try await body() } catch let e as PSQLError where e.serverInfo?[.sqlState] == PostgresError.Code.uniqueViolation.raw {
            throw LoginStoreError.duplicate
        }
    }
}

public struct LoginStoreConfigurationError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
