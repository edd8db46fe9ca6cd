import DurableSQLite
import Foundation
import GRDB

extension SQLiteLoginStore {
    public func addCredential(_ c: Credential, event: AccountEvent) async throws {
        do {
            try await writer.write { db in
                try Self.insert(event, db)
                try db.execute(
                    cached: """
                        INSERT INTO credential (id, account_id, public_key, sign_count, name, attestation_format, created_at, last_used_at, aaguid, transports, flags,
                                                attested_key)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        c.id, c.accountID, c.publicKey, Int64(c.signCount), c.name, c.attestationFormat, c.createdAt,
                        c.lastUsedAt,
                        c.aaguid, c.transports.joined(separator: ","), c.flags, c.attestedKey,
                    ]
                )
            }
        } catch let e as DatabaseError where e.resultCode == .SQLITE_CONSTRAINT {
            throw LoginServerError.duplicate
        }
    }

    public func credentials(accountID: String) async throws -> [Credential] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                cached: "SELECT * FROM credential WHERE account_id = ? ORDER BY created_at",
                arguments: [accountID]
            ).map(Self.credential)
        }
    }

    public func credentialAndAccount(id: Data) async throws -> (Credential, Account)? {
        try await pool.read { db in
            guard
                let credential = try Row.fetchOne(db, cached: "SELECT * FROM credential WHERE id = ?", arguments: [id])
                    .map(Self.credential),
                let account = try Row.fetchOne(
                    db,
                    cached: "SELECT * FROM account WHERE id = ?",
                    arguments: [credential.accountID]
                ).map(Self.account)
            else { return nil }
            return (credential, account)
        }
    }

    public func completePasskeyLogin(_ c: PasskeyLoginCompletion) async throws -> PasskeyLoginOutcome {
        try await writer.write { db in
            try db.execute(
                cached: "INSERT OR IGNORE INTO used_challenge (nonce, expires_at) VALUES (?, ?)",
                arguments: [c.challengeNonce, c.challengeExpiresAt]
            )
            guard db.changesCount == 1 else { return .challengeUsed }
            try db.execute(
                cached:
                    "UPDATE credential SET sign_count = ?, last_used_at = ?, flags = (flags & ~2) | ? WHERE id = ? AND sign_count = ?",
                arguments: [
                    Int64(c.newSignCount), c.session.createdAt, c.backedUp ? 2 : 0, c.credentialID,
                    Int64(c.expectedSignCount),
                ]
            )
            guard db.changesCount == 1 else { return .counterMoved }
            try Self.insert(c.session, db)
            try Self.insert(c.event, db)
            try db.execute(cached: "DELETE FROM login_failure WHERE key = ?", arguments: [c.clearingFailures])
            return .completed(
                devicesAdded: try Row.fetchAll(
                    db,
                    cached: """
                        SELECT * FROM credential WHERE account_id = ? AND id != ? AND created_at > ? ORDER BY created_at, id
                        """,
                    arguments: [c.session.accountID, c.credentialID, c.announcingDevicesAddedSince]
                ).map(Self.credential)
            )
        }
    }

    public func isChallengeUsed(nonce: Data) async throws -> Bool {
        try await pool.read { db in
            try Bool.fetchOne(
                db,
                sql: "SELECT EXISTS (SELECT 1 FROM used_challenge WHERE nonce = ?)",
                arguments: [nonce]
            ) ?? false
        }
    }

    public func listing(username: String) async throws -> [ListedCredential] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                cached: """
                    SELECT account.id, credential.id, credential.transports FROM (SELECT ? AS username) AS asked
                    LEFT JOIN account ON account.username = asked.username LEFT JOIN credential ON credential.account_id = account.id
                    ORDER BY credential.created_at, credential.id
                    """,
                arguments: [username]
            ).map { row in
                ListedCredential(accountID: row[0], id: row[1], transports: row[2])
            }
        }
    }

    static func credential(_ row: Row) -> Credential {
        let count: Int64 = row["sign_count"]
        let transports: String = row["transports"]
        var credential = Credential(
            id: row["id"],
            accountID: row["account_id"],
            publicKey: row["public_key"],
            signCount: UInt32(truncatingIfNeeded: count),
            name: row["name"],
            attestationFormat: row["attestation_format"],
            createdAt: row["created_at"],
            lastUsedAt: row["last_used_at"],
            aaguid: row["aaguid"],
            transports: transports.split(separator: ",").map(String.init)
        )
        credential.setFlags(row["flags"])
        credential.attestedKey = row["attested_key"]
        return credential
    }

    public func renameCredential(id: Data, accountID: String, name: String) async throws -> Bool {
        try await writer.write { db in
            try db.execute(
                cached: "UPDATE credential SET name = ? WHERE id = ? AND account_id = ?",
                arguments: [name, id, accountID]
            )
            return db.changesCount == 1
        }
    }

    public func deleteCredential(
        id: Data,
        accountID: String,
        event: AccountEvent,
        keepingSession: Data?
    ) async throws -> Bool {
        try await writer.write { db in
            try db.execute(
                cached: "DELETE FROM credential WHERE id = ? AND account_id = ?",
                arguments: [id, accountID]
            )
            guard db.changesCount == 1 else { return false }
            try db.execute(
                cached: "DELETE FROM session WHERE account_id = ? AND credential_id = ? AND token_hash IS NOT ?",
                arguments: [accountID, id, keepingSession]
            )
            try Self.insert(event, db)
            return true
        }
    }
}
