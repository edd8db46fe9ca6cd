import Foundation

/// Everything the login server keeps, behind one interface: SQLite embedded (the default) or
/// PostgreSQL (several instances behind a balancer). Challenges and rate-limit counters live here
/// too, so any instance can finish what another started.
public protocol LoginStore: Sendable {
    /// "sqlite" or "postgresql", for /health.
    var kind: String { get }
    func migrate() async throws
    func ping() async throws

    /// Throws `LoginStoreError.duplicate` when the name is taken.
    func createAccount(_ account: Account) async throws
    func account(named username: String) async throws -> Account?
    func account(id: String) async throws -> Account?

    func createSession(_ session: Session) async throws
    func session(tokenHash: Data) async throws -> Session?
    func deleteSession(tokenHash: Data) async throws
    /// The session's owner typed the account's password at `time` (a step-up).
    func markPasswordVerified(tokenHash: Data, at time: Double) async throws

    func storeChallenge(_ challenge: Challenge) async throws
    /// Removes and returns the challenge: each is used at most once, whatever the outcome.
    func takeChallenge(_ value: Data) async throws -> Challenge?

    /// Throws `LoginStoreError.duplicate` when the credential ID is registered already.
    func addCredential(_ credential: Credential) async throws
    func credential(id: Data) async throws -> Credential?
    func credentials(accountID: String) async throws -> [Credential]
    /// The credentials of the account named `username` (none if there is no such account), in one
    /// look-up either way: the answer for an unknown name costs what a known one does.
    func credentials(username: String) async throws -> [Credential]
    /// Compare-and-set: stores `newCount` only if the stored count is still `expected`, so two
    /// instances verifying the same assertion cannot both accept it.
    func advanceSignCount(credentialID: Data, expected: UInt32, newCount: UInt32, usedAt: Double) async throws -> Bool
    func deleteCredential(id: Data, accountID: String) async throws -> Bool

    /// In one transaction: the failure records of `keys`, `decide`'s verdict on them and, if it
    /// admits the attempt, one more failure on each key at `now` — durable before this returns, so
    /// the attempt is counted before its secret is checked (the caller clears the keys when it
    /// succeeds). Instances sharing the store share the counts.
    func admitAttempt(keys: [String], at now: Double, decide: @Sendable ([String: FailureRecord]) -> ThrottleDecision) async throws -> ThrottleDecision
    func clearFailures(keys: [String]) async throws

    /// Forgets expired sessions and challenges, and failure records idle since `failuresIdleSince`
    /// unless they reached `lockAt` (a lock waits for its reset).
    func removeExpired(now: Double, failuresIdleSince: Double, lockAt: Int?) async throws

    /// This deployment's random secret (created on first use; shared by every instance): keys the
    /// decoy credential IDs that unknown usernames get.
    func secret() async throws -> Data
}

public enum LoginStoreError: Error, Equatable {
    case duplicate
}

public struct Account: Sendable, Equatable {
    public var id: String
    public var username: String
    public var passwordHash: String
    /// The WebAuthn user handle (random, not the username).
    public var userHandle: Data
    public var createdAt: Double
}

public struct Session: Sendable, Equatable {
    /// SHA-256 of the bearer token: a copy of the database holds no usable token.
    public var tokenHash: Data
    public var accountID: String
    public var createdAt: Double
    public var expiresAt: Double
    public var method: String
    /// When the account's password was last typed into this session (at login or as a step-up).
    public var passwordVerifiedAt: Double?
    /// The credential a passkey login used.
    public var credentialID: Data?
}

public struct Challenge: Sendable, Equatable {
    public enum Purpose: String, Sendable { case registration, authentication }
    public var value: Data
    public var purpose: Purpose
    /// Registration: the signed-in account; authentication: the named account, if any.
    public var accountID: String?
    /// Registration is bound to the session that asked for it.
    public var sessionTokenHash: Data?
    public var deviceName: String?
    public var expiresAt: Double
}

public struct Credential: Sendable, Equatable {
    public var id: Data
    public var accountID: String
    public var publicKey: Data
    public var signCount: UInt32
    public var name: String
    public var attestationFormat: String
    public var createdAt: Double
    public var lastUsedAt: Double?
}
