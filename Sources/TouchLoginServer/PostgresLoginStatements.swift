import Foundation
import PostgresNIO

/// The statements every passkey login runs, prepared once per pooled connection: PostgreSQL then
/// parses and plans each once instead of at every login (that was most of its CPU per login).
/// Parameter types are named, so a first use with a NULL cannot leave one unknown. Names are
/// versioned: a migration that changes what a statement reads or returns must rename it, or
/// connections that prepared the old one answer "cached plan must not change result type" until
/// they are replaced (migrations so far only add).
extension PostgresLoginStore {
    /// The credentials of the account named `username` (assertion options).
    /// What the login options list for a name (`LoginStore.listing`): one row whatever the name.
    struct Listing: PostgresPreparedStatement {
        static let name = "touchlogin_listing_v1"
        static let sql = """
            SELECT a.id, c.id, c.transports FROM (SELECT $1::text AS username) AS asked
            LEFT JOIN account a ON a.username = asked.username LEFT JOIN credential c ON c.account_id = a.id
            ORDER BY c.created_at, c.id
            """
        static let bindingDataTypes: [PostgresDataType] = [.text]
        var username: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings()
            bindings.append(username)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> ListedCredential {
            let (accountID, id, transports) = try row.decode((String?, Data?, String?).self)
            return ListedCredential(accountID: accountID, id: id, transports: transports)
        }
    }

    /// A credential and its account, in one look-up (the login's read).
    struct CredentialAndAccount: PostgresPreparedStatement {
        static let name = "touchlogin_credential_and_account_v1"
        static let sql = """
            SELECT \(credentialColumns), a.username, a.password_hash, a.user_handle, a.created_at AS account_created_at
            FROM credential c JOIN account a ON a.id = c.account_id WHERE c.id = $1
            """
        static let bindingDataTypes: [PostgresDataType] = [.bytea]
        var id: Data

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings()
            try bindings.append(id)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> (Credential, Account) {
            let credential = try PostgresLoginStore.credential(row)
            let columns = row.makeRandomAccess()
            return (
                credential,
                Account(
                    id: credential.accountID,
                    username: try columns["username"].decode(String.self),
                    passwordHash: try columns["password_hash"].decode(String.self),
                    userHandle: try columns["user_handle"].decode(Data.self),
                    createdAt: try columns["account_created_at"].decode(Double.self)
                )
            )
        }
    }

    /// Everything a verified login changes, as one statement: one round trip and one atomic
    /// commit. Each step runs only if the one before it did (the nonce newly recorded, then the
    /// counter moved as expected). Data-modifying CTEs share one snapshot; the counter's
    /// compare-and-set still holds under concurrent logins, as an UPDATE re-checks its condition
    /// on the row version it waited for. The rows: the outcome, with the account's devices bound
    /// since the completion's `announcingDevicesAddedSince` (credential columns NULL if none).
    struct CompletePasskeyLogin: PostgresPreparedStatement {
        static let name = "touchlogin_complete_passkey_login_v1"
        static let sql = """
            WITH used AS (
                INSERT INTO used_challenge (nonce, expires_at) VALUES ($1, $2)
                ON CONFLICT (nonce) DO NOTHING RETURNING nonce
            ), moved AS (
                UPDATE credential SET sign_count = $3, last_used_at = $4, flags = (flags & ~2) | $5
                WHERE id = $6 AND sign_count = $7 AND EXISTS (SELECT 1 FROM used) RETURNING id
            ), session_made AS (
                INSERT INTO session (token_hash, account_id, created_at, expires_at, method, password_verified_at, credential_id)
                SELECT $8, $9, $4, $10, $11, $12, $13 WHERE EXISTS (SELECT 1 FROM moved)
            ), event_made AS (
                INSERT INTO account_event (account_id, at, kind, credential_id, device_name, address)
                SELECT $14, $15, $16, $17, $18, $19 WHERE EXISTS (SELECT 1 FROM moved)
            ), cleared AS (
                DELETE FROM login_failure WHERE key = $20 AND EXISTS (SELECT 1 FROM moved)
            )
            SELECT outcome.recorded, outcome.advanced, \(credentialColumns)
            FROM (SELECT EXISTS (SELECT 1 FROM used) AS recorded, EXISTS (SELECT 1 FROM moved) AS advanced) outcome
            LEFT JOIN credential c ON outcome.advanced AND c.account_id = $9 AND c.id != $6 AND c.created_at > $21
            ORDER BY c.created_at, c.id
            """
        static let bindingDataTypes: [PostgresDataType] = [
            .bytea, .float8, .int8, .float8, .int4, .bytea, .int8,  // used, moved
            .bytea, .text, .float8, .text, .float8, .bytea,  // session_made
            .text, .float8, .text, .bytea, .text, .text,  // event_made
            .text, .float8,  // cleared, the announcement
        ]
        var completion: PasskeyLoginCompletion

        /// One row: whether the nonce was recorded and the counter moved, and one device bound since (if any).
        enum Row {
            case challengeUsed, counterMoved
            case completed(addedDevice: Credential?)
        }

        func makeBindings() throws -> PostgresBindings {
            let c = completion
            let s = c.session
            let e = c.event
            var b = PostgresBindings()
            try b.append(c.challengeNonce)
            b.append(c.challengeExpiresAt)
            b.append(Int64(c.newSignCount))
            b.append(s.createdAt)
            b.append(Int32(c.backedUp ? 2 : 0))
            try b.append(c.credentialID)
            b.append(Int64(c.expectedSignCount))
            try b.append(s.tokenHash)
            b.append(s.accountID)
            b.append(s.expiresAt)
            b.append(s.method)
            b.append(s.passwordVerifiedAt)
            try b.append(s.credentialID)
            b.append(e.accountID)
            b.append(e.at)
            b.append(e.kind.rawValue)
            try b.append(e.credentialID)
            b.append(e.deviceName)
            b.append(e.address)
            b.append(c.clearingFailures)
            b.append(c.announcingDevicesAddedSince)
            return b
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            let columns = row.makeRandomAccess()
            guard try columns["recorded"].decode(Bool.self) else { return .challengeUsed }
            guard try columns["advanced"].decode(Bool.self) else { return .counterMoved }
            return .completed(
                addedDevice: try columns["id"].decode(Data?.self) == nil ? nil : PostgresLoginStore.credential(row)
            )
        }
    }
}
