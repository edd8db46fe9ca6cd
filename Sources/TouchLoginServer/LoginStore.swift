import Foundation

/// Everything the login server keeps, behind one interface: SQLite embedded (the default) or
/// PostgreSQL (several instances behind a balancer). Challenges and rate-limit counters live here
/// too, so any instance can finish what another started.
public protocol LoginStore: Sendable {
    /// "sqlite" or "postgresql", for /health.
    var kind: String { get }
    func migrate() async throws
    func ping() async throws

    /// Throws `LoginServerError.duplicate` when the name is taken.
    func createAccount(_ account: Account) async throws
    func account(named username: String) async throws -> Account?
    /// The account named `username`, or `standIn` when there is none — in one query of the same
    /// shape either way, the stand-in's values coming back through the same columns and decoded
    /// alike, so a password check for an unknown name costs what one for a known name does.
    func account(named username: String, standIn: Account) async throws -> Account
    func account(id: String) async throws -> Account?

    /// The session and the event that made it (a sign-up or a password login), together.
    func createSession(_ session: Session, event: AccountEvent) async throws
    func session(tokenHash: Data) async throws -> Session?
    func deleteSession(tokenHash: Data) async throws
    /// A new password hash; every other session of the account ends, the password's failures are
    /// forgotten, the event is recorded — together.
    func changePassword(
        accountID: String,
        hash: String,
        keepingSession tokenHash: Data,
        verifiedAt: Double,
        clearingFailures key: String,
        event: AccountEvent
    ) async throws
    /// The session's owner typed the account's password at `time` (a step-up).
    /// Replaces the account's password hash with `new` if it is still `old` (a hash remade at
    /// today's cost after a right password; a change made meanwhile wins). Whether it did.
    func rehashPassword(accountID: String, from old: String, to new: String) async throws -> Bool
    func markPasswordVerified(tokenHash: Data, at time: Double) async throws

    func storeChallenge(_ challenge: Challenge) async throws
    /// Removes and returns the challenge: each is used at most once, whatever the outcome.
    func takeChallenge(_ value: Data) async throws -> Challenge?

    /// Throws `LoginServerError.duplicate` when the credential ID is registered already.
    func addCredential(_ credential: Credential, event: AccountEvent) async throws
    /// The credential and the account it belongs to, in one look-up.
    func credentialAndAccount(id: Data) async throws -> (Credential, Account)?
    func credentials(accountID: String) async throws -> [Credential]
    /// What the login options list for `username`: one row per credential of the account of that
    /// name, or a single stand-in row (no credential; no account either for an unknown name) — one
    /// query of the same shape whatever the name, each row decoded alike, so the answer for a name
    /// without a passkey costs what one with a passkey does.
    func listing(username: String) async throws -> [ListedCredential]
    func renameCredential(id: Data, accountID: String, name: String) async throws -> Bool
    /// Deletes the credential and, in the same transaction, the sessions it signed in (but
    /// `keepingSession`, the one revoking it), with the event. Whether it existed.
    func deleteCredential(id: Data, accountID: String, event: AccountEvent, keepingSession: Data?) async throws -> Bool
    /// The account's newest events, newest first.
    func events(accountID: String, limit: Int) async throws -> [AccountEvent]

    /// In one transaction: the failure records of `keys`, `decide`'s verdict on them and, if it
    /// admits the attempt, one more failure on each key at `now` — durable before this returns, so
    /// the attempt is counted before its secret is checked (the caller clears the keys when it
    /// succeeds). Instances sharing the store share the counts.
    func admitAttempt(
        keys: [String],
        at now: Double,
        decide: @escaping @Sendable ([String: FailureRecord]) -> ThrottleDecision
    ) async throws -> ThrottleDecision
    func clearFailures(keys: [String]) async throws
    /// Forgets the failure records whose key starts with `prefix` (the operator's lift: every
    /// address's record for one username).
    func clearFailures(keysStartingWith prefix: String) async throws

    /// Everything a verified passkey login changes, in one transaction: the challenge's nonce
    /// recorded as used, the sign counter compared and set, the session created, the password
    /// failures of `clearingFailures` forgotten. Nothing but the nonce is kept unless it completes.
    /// A completed login brings the account's other credentials bound after
    /// `announcingDevicesAddedSince`, read in the same transaction.
    func completePasskeyLogin(_ completion: PasskeyLoginCompletion) async throws -> PasskeyLoginOutcome
    /// Whether a login challenge's nonce was used (asked only to name a refusal: a replay).
    func isChallengeUsed(nonce: Data) async throws -> Bool

    /// Forgets expired sessions, challenges and used-challenge nonces, events older than
    /// `eventsBefore`, and failure records idle since `failuresIdleSince` unless they reached
    /// `lockAt` (a lock waits for its reset).
    func removeExpired(now: Double, failuresIdleSince: Double, lockAt: Int?, eventsBefore: Double) async throws

    /// This deployment's random secret (created on first use; shared by every instance): keys the
    /// login challenges' MACs and the decoy credential IDs that unknown usernames get.
    func secret() async throws -> Data
}

public struct PasskeyLoginCompletion: Sendable {
    public var challengeNonce: Data
    public var challengeExpiresAt: Double
    public var credentialID: Data
    public var expectedSignCount: UInt32
    public var newSignCount: UInt32
    /// The backup state (BS) the assertion reported.
    public var backedUp: Bool
    public var session: Session
    public var clearingFailures: String
    public var event: AccountEvent
    /// When this credential was last used (or bound): devices bound since are announced to it.
    public var announcingDevicesAddedSince: Double
}

/// Something that happened to an account, kept for its owner to see (`GET /api/account`): how
/// and from where it was signed into, which devices were added and removed.
public struct AccountEvent: Sendable, Equatable {
    public enum Kind: String, Sendable, Codable {
        case signUp = "sign-up"
        case passwordLogin = "password-login"
        case passkeyLogin = "passkey-login"
        case deviceAdded = "device-added"
        case deviceRevoked = "device-revoked"
        case passwordChanged = "password-changed"
    }
    public var accountID: String
    public var at: Double
    public var kind: Kind
    public var credentialID: Data?
    public var deviceName: String?
    /// The client's address as the limits saw it.
    public var address: String
}

public enum PasskeyLoginOutcome: Sendable, Equatable {
    /// With the account's other credentials bound since the completion's
    /// `announcingDevicesAddedSince`, oldest first.
    case completed(devicesAdded: [Credential])
    /// The nonce was used already (a replay, perhaps at another instance).
    case challengeUsed
    /// The sign counter moved since it was read (a concurrent use of the same assertion).
    case counterMoved
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
    /// The signed-in account. (Stored challenges are registration's; login challenges are
    /// `SignedChallenge`s, never stored.)
    public var accountID: String?
    /// Registration is bound to the session that asked for it.
    public var sessionTokenHash: Data?
    public var deviceName: String?
    public var expiresAt: Double
}

/// One row of what the login options list for a name (`LoginStore.listing`): a credential and
/// its account, or the stand-in row of a name without one (`id` nil; `accountID` nil too when no
/// account has the name).
public struct ListedCredential: Sendable, Equatable {
    public var accountID: String?
    public var id: Data?
    /// As stored: comma-separated.
    public var transports: String?
    public init(accountID: String?, id: Data?, transports: String?) {
        self.accountID = accountID
        self.id = id
        self.transports = transports
    }
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
    /// What the authenticator said of itself at registration: its model (AAGUID), how it can be
    /// reached (transports, as the browser reported them), whether the credential may be backed up
    /// (BE, fixed for its life) and is (BS, updated at each login), and whether it verified the
    /// user when it was made (WebAuthn's uvInitialized).
    public var aaguid = Data(count: 16)
    public var transports: [String] = []
    public var backupEligible = false
    public var backedUp = false
    public var userVerifiedAtRegistration = false
    /// What a trusted attestation stated of the key (a laenclaved key: its daemon and access
    /// control, `KeyDescription.summary`); nil for a key no trusted root vouched for.
    public var attestedKey: String?

    /// BE, BS and uvInitialized as one number in the stores (bits 1, 2, 4).
    var flags: Int { (backupEligible ? 1 : 0) | (backedUp ? 2 : 0) | (userVerifiedAtRegistration ? 4 : 0) }
    mutating func setFlags(_ flags: Int) {
        backupEligible = flags & 1 != 0
        backedUp = flags & 2 != 0
        userVerifiedAtRegistration = flags & 4 != 0
    }
}
