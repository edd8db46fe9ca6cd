import Foundation
import Logging
import PostgresNIO

extension PostgresLoginStore {
    public func addCredential(_ c: Credential, event: AccountEvent) async throws {
        try await unique {
            try await client.withTransaction(logger: logger) { connection in
                try await Self.insert(event, connection, logger)
                try await connection.query(
                    """
                    INSERT INTO credential (id, account_id, public_key, sign_count, name, attestation_format, created_at, last_used_at, aaguid, transports, flags,
                                            attested_key)
                    VALUES (\(c.id), \(c.accountID), \(c.publicKey), \(Int64(c.signCount)), \(c.name), \(c.attestationFormat), \(c.createdAt), \(c.lastUsedAt),
                            \(c.aaguid), \(c.transports.joined(separator: ",")), \(Int32(c.flags)), \(c.attestedKey))
                    """,
                    logger: logger
                )
            }
        }
    }

    public func credentials(accountID: String) async throws -> [Credential] {
        try await credentials(
            client.query(
                "SELECT \(unescaped: Self.credentialColumns) FROM credential c WHERE c.account_id = \(accountID) ORDER BY c.created_at",
                logger: logger
            )
        )
    }

    public func credentialAndAccount(id: Data) async throws -> (Credential, Account)? {
        for try await found in try await client.execute(CredentialAndAccount(id: id), logger: logger) { return found }
        return nil
    }

    static let credentialColumns =
        "c.id, c.account_id, c.public_key, c.sign_count, c.name, c.attestation_format, c.created_at, c.last_used_at, c.aaguid, c.transports, c.flags, c.attested_key"

    static func credential(_ row: PostgresRow) throws -> Credential {
        let c = row.makeRandomAccess()
        var credential = Credential(
            id: try c["id"].decode(Data.self),
            accountID: try c["account_id"].decode(String.self),
            publicKey: try c["public_key"].decode(Data.self),
            signCount: UInt32(truncatingIfNeeded: try c["sign_count"].decode(Int64.self)),
            name: try c["name"].decode(String.self),
            attestationFormat: try c["attestation_format"].decode(String.self),
            createdAt: try c["created_at"].decode(Double.self),
            lastUsedAt: try c["last_used_at"].decode(Double?.self),
            aaguid: try c["aaguid"].decode(Data.self),
            transports: try c["transports"].decode(String.self).split(separator: ",").map(String.init)
        )
        credential.setFlags(Int(try c["flags"].decode(Int32.self)))
        credential.attestedKey = try c["attested_key"].decode(String?.self)
        return credential
    }

    public func completePasskeyLogin(_ c: PasskeyLoginCompletion) async throws -> PasskeyLoginOutcome {
        var outcome: PasskeyLoginOutcome?
        var added: [Credential] = []
        for try await row in try await client.execute(CompletePasskeyLogin(completion: c), logger: logger) {
            switch row {
            case .challengeUsed: outcome = .challengeUsed
            case .counterMoved: outcome = .counterMoved
            case .completed(let device):
                outcome = .completed(devicesAdded: [])
                if let device { added.append(device) }
            }
        }
        switch outcome {
        case .completed: return .completed(devicesAdded: added)
        case let other?: return other
        case nil: throw LoginServerError(.noAnswer, "the statement returned no row")
        }
    }

    public func isChallengeUsed(nonce: Data) async throws -> Bool {
        let rows = try await client.query("SELECT nonce FROM used_challenge WHERE nonce = \(nonce)", logger: logger)
        for try await _ in rows.decode(Data.self) { return true }
        return false
    }

    public func listing(username: String) async throws -> [ListedCredential] {
        var found: [ListedCredential] = []
        for try await row in try await client.execute(Listing(username: username), logger: logger) { found.append(row) }
        return found
    }

    func credentials(_ rows: PostgresRowSequence) async throws -> [Credential] {
        var found: [Credential] = []
        for try await row in rows { found.append(try Self.credential(row)) }
        return found
    }

    public func renameCredential(id: Data, accountID: String, name: String) async throws -> Bool {
        let rows = try await client.query(
            "UPDATE credential SET name = \(name) WHERE id = \(id) AND account_id = \(accountID) RETURNING id",
            logger: logger
        )
        for try await _ in rows.decode(Data.self) { return true }
        return false
    }

    public func deleteCredential(
        id: Data,
        accountID: String,
        event: AccountEvent,
        keepingSession: Data?
    ) async throws -> Bool {
        try await client.withTransaction(logger: logger) { connection in
            let rows = try await connection.query(
                "DELETE FROM credential WHERE id = \(id) AND account_id = \(accountID) RETURNING id",
                logger: logger
            )
            var deleted = false
            for try await _ in rows.decode(Data.self) { deleted = true }
            if deleted {
                try await connection.query(
                    "DELETE FROM session WHERE account_id = \(accountID) AND credential_id = \(id) AND token_hash IS DISTINCT FROM \(keepingSession)",
                    logger: logger
                )
                try await Self.insert(event, connection, logger)
            }
            return deleted
        }
    }
}
