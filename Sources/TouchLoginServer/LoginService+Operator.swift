import Crypto
import Foundation
import KeyAttestation
import Logging
import Synchronization
import TouchLoginAPI
import WebAuthn

/// What the operator does (`touchlogin-server admin`).
extension LoginService {
    // MARK: The operator (`touchlogin-server admin`)

    /// An account as the operator looks it up: its devices and recent activity.
    public func operatorAccount(username: String) async throws -> AccountResponse {
        guard let account = try await store.account(named: (try? Self.normalized(username)) ?? username) else {
            throw APIError(.notFound, "No account is named \(username).")
        }
        return try await accountInfo(account)
    }

    /// Revokes one device of an account for the operator (a lost laptop, a compromised key): its
    /// passkey login ends at once, and the account's activity says the operator did it.
    public func operatorRevoke(username: String, credentialID: String) async throws -> DeviceResponse {
        guard let account = try await store.account(named: (try? Self.normalized(username)) ?? username) else {
            throw APIError(.notFound, "No account is named \(username).")
        }
        guard let id = Data(base64URLEncoded: credentialID),
            let credential = try await store.credentials(accountID: account.id).first(where: { $0.id == id })
        else {
            throw APIError(.notFound, "No such device on this account.")
        }
        let event = AccountEvent(
            accountID: account.id,
            at: clock(),
            kind: .deviceRevoked,
            credentialID: id,
            deviceName: credential.name,
            address: "operator"
        )
        guard try await store.deleteCredential(id: id, accountID: account.id, event: event, keepingSession: nil) else {
            throw APIError(.notFound, "No such device on this account.")
        }
        logger.notice("device revoked by the operator", metadata: ["account": "\(account.id)"])
        return Self.device(credential)
    }

    /// The operator's reset of a password path: the account's lock, and the waits of every
    /// address's attempts at it.
    public func liftPasswordLock(username: String) async throws {
        let name = (try? Self.normalized(username)) ?? username
        try await store.clearFailures(keys: [Self.accountPasswordKey(name)])
        try await store.clearFailures(keysStartingWith: Self.addressPasswordKeyPrefix(name))
    }

    public func logout(token: String) async throws {
        try await store.deleteSession(tokenHash: Self.tokenHash(token))
    }

    /// The session and account behind a bearer token, or `unauthorized`.
    public func authenticate(bearer token: String?) async throws -> (Session, Account) {
        guard let token, !token.isEmpty, token.utf8.count <= 128 else {
            throw APIError(.unauthorized, "Sign in first (Authorization: Bearer <token>).")
        }
        guard let session = try await store.session(tokenHash: Self.tokenHash(token)), session.expiresAt > clock(),
            let account = try await store.account(id: session.accountID)
        else {
            throw APIError(.unauthorized, "The session has ended or was never valid; sign in again.")
        }
        return (session, account)
    }

    public func accountInfo(_ account: Account) async throws -> AccountResponse {
        AccountResponse(
            username: account.username,
            createdAt: account.createdAt,
            devices: try await devices(of: account),
            activity: try await store.events(accountID: account.id, limit: 50).map(Self.activity)
        )
    }

    /// Forgets expired sessions and challenges and long-idle failure records (the server runs it
    /// every minute, off the login path).
    public func removeExpired() async throws {
        let now = clock()
        try await store.removeExpired(
            now: now,
            failuresIdleSince: now - configuration.failureMemory,
            lockAt: configuration.rateLimits.passwordPerAccount.lockAfter,
            eventsBefore: now - configuration.activityMemory
        )
    }
}
