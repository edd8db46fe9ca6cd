import Crypto
import Foundation
import KeyAttestation
import Logging
import Synchronization
import TouchLoginAPI
import WebAuthn

/// The login server's rules, apart from HTTP: accounts, sessions, device binding and passkey
/// login, limits against guessing and flooding. Every method either returns the answer or throws
/// an `APIError` (or `LoginServerError`'s `tooManyAttempts…`).
public struct LoginService: Sendable {
    public let store: any LoginStore
    public let configuration: ServerConfiguration
    public let metrics: LoginMetrics
    let hasher: PasswordHasher
    let passwordWork: PasswordWork
    let addressLimits: AddressLimits
    let secret = SecretCache()
    /// The attestation-key CA, made once: its root is signed when it is made (ECDSA draws a new
    /// signature each time), so one process always shows the same certificate.
    let tpmAuthorityCache = MadeOnce<TPMAttestationKeyAuthority>()
    let clock: @Sendable () -> Double
    let logger: Logger

    public init(
        store: any LoginStore,
        configuration: ServerConfiguration,
        metrics: LoginMetrics = LoginMetrics(),
        logger: Logger = Logger(label: "touchlogin-server"),
        clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.store = store
        self.configuration = configuration
        self.metrics = metrics
        self.hasher = PasswordHasher(cost: configuration.passwordCost)
        self.passwordWork = PasswordWork(limit: configuration.passwordChecksAtOnce)
        self.addressLimits = AddressLimits(configuration.rateLimits)
        self.clock = clock
        self.logger = logger
    }

    // MARK: Shared steps

    /// A session made by typing the password (a sign-up or a password login), with a new client
    /// token for the client that typed it (`PasswordBudget.knownClient`).
    func startSession(for account: Account, event: AccountEvent.Kind, address: String) async throws -> SessionResponse {
        let now = clock()
        var (response, session) = newSession(for: account, method: "password", passwordVerifiedAt: now)
        try await store.createSession(
            session,
            event: AccountEvent(accountID: account.id, at: now, kind: event, address: address)
        )
        response.clientToken = PasswordBudget.newClientToken(
            username: account.username,
            passwordHash: account.passwordHash,
            key: try await secretKey()
        )
        return response
    }

    /// A new bearer token and the session row that stands for it (the store keeps only its hash).
    func newSession(
        for account: Account,
        method: String,
        passwordVerifiedAt: Double? = nil,
        credentialID: Data? = nil
    ) -> (SessionResponse, Session) {
        let token = Self.random(32).base64URLEncodedString()
        let now = clock()
        let session = Session(
            tokenHash: Self.tokenHash(token),
            accountID: account.id,
            createdAt: now,
            expiresAt: now + configuration.sessionLifetime,
            method: method,
            passwordVerifiedAt: passwordVerifiedAt,
            credentialID: credentialID
        )
        return (
            SessionResponse(token: token, username: account.username, expiresAt: session.expiresAt, method: method),
            session
        )
    }

    /// The password check behind every password entry: counted before it is made (so parallel
    /// guesses cannot outrun the count) on the records and schedules of the budget `budgetFor`
    /// chooses for the account (`PasswordBudget`); an unknown username costs and answers exactly
    /// as a known one. Returns the account as stored after the check (its hash remade if it was).
    func checkPassword(
        _ password: String,
        username: String,
        address: String,
        budgetFor: (Account) -> PasswordBudget
    ) async throws -> Account {
        // A stand-in for an unknown name, read and checked like a real account: the same query,
        // the same decoding, the same scrypt work (`touchlogin-bench timing` measures it).
        let hasher = self.hasher
        var account = try await store.account(
            named: username,
            standIn: Account(
                id: "",
                username: username,
                passwordHash: hasher.standIn,
                userHandle: Data(count: 32),
                createdAt: 0
            )
        )
        let budget = budgetFor(account)
        let keys = budget.keys
        let now = clock()
        let limits = configuration.rateLimits
        let decision = try await store.admitAttempt(keys: keys, at: now) { records in
            budget.decide(records, limits, at: now)
        }
        switch decision {
        case .admitted: break
        case .wait(let seconds):
            metrics.rateLimited.increment()
            throw LoginServerError.tooManyAttempts(forAccount: true, retryAfter: Self.seconds(seconds))
        case .locked:
            metrics.rateLimited.increment()
            throw APIError(
                .passwordLocked,
                "Password sign-in for this account is locked after too many failed attempts; sign in with a passkey or from a device where you signed in with the password before, or ask the operator to lift it."
            )
        }
        let stored = account.passwordHash
        let matches = try await passwordWork.run { hasher.verify(password, against: stored) }
        guard matches, !account.id.isEmpty else {
            metrics.passwordLogins.failure()
            logger.notice("password refused", metadata: ["username": "\(username)", "address": "\(address)"])
            throw APIError(.invalidCredentials, "Wrong username or password.")
        }
        try await store.clearFailures(keys: budget.clearedBySuccess(username: username))
        if hasher.needsRehash(stored) {
            // Made at a lower cost (before the default rose): remade now, the one time the password
            // is known. Best effort: a busy pool or a store error leaves the old hash for next time,
            // never fails the login.
            do {
                let remade = try await passwordWork.run { try hasher.hash(password) }
                if try await store.rehashPassword(accountID: account.id, from: stored, to: remade) {
                    account.passwordHash = remade
                    logger.info("password hash remade at today's cost", metadata: ["username": "\(username)"])
                }
            } catch {
                logger.notice(
                    "password hash not remade this time",
                    metadata: ["username": "\(username)", "error": "\(error)"]
                )
            }
        }
        return account
    }

    func requireFreshPassword(_ session: Session) throws {
        guard let verified = session.passwordVerifiedAt, clock() - verified <= configuration.stepUpWindow else {
            throw APIError(
                .stepUpRequired,
                "Changing this account's devices needs its password typed again (POST /api/session/password)."
            )
        }
    }

    /// The deployment's secret as a MAC key (read from the store once). A short one (a store
    /// answering with nothing) would make every challenge MAC and decoy forgeable: it stops the
    /// request instead.
    func secretKey() async throws -> SymmetricKey {
        let value = try await secret.value { try await store.secret() }
        guard value.count >= 32 else {
            throw APIError(.unavailable, "The server's secret is missing from its database.")
        }
        return SymmetricKey(data: value)
    }

    /// HMAC-SHA-256 of `label` and `value` under the deployment's secret: a challenge's binding,
    /// or the parts of a decoy (`Decoy`) — stable for their input, unpredictable without the secret.
    static func mac(_ label: String, _ value: String, _ key: SymmetricKey) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: Data("\(label)\u{0}\(value)".utf8), using: key))
    }

    /// What ties a login challenge to the named account: 16 bytes of a MAC of the account's ID,
    /// or of the name when no account with a credential has it — the same size and look either way.
    static func binding(accountID: String?, username: String, _ key: SymmetricKey) -> Data {
        (accountID.map { mac("challenge-account", $0, key) } ?? mac("challenge-nobody", username, key)).prefix(16)
    }

    /// The registration challenge named in clientDataJSON, taken (single use) and checked for purpose and age.
    func takeChallenge(from clientDataJSON: Data, purpose: Challenge.Purpose) async throws -> Challenge {
        let clientData: CollectedClientData
        do { clientData = try CollectedClientData(json: clientDataJSON) } catch let e as WebAuthnError {
            throw APIError(e.code.rawValue, e.message)
        }
        guard let value = Data(base64URLEncoded: clientData.challenge), value.count == 32,
            let challenge = try await store.takeChallenge(value), challenge.purpose == purpose
        else {
            throw APIError(.challengeUnknown, "Unknown or already used challenge; ask for new options.")
        }
        guard challenge.expiresAt > clock() else {
            throw APIError(.challengeExpired, "The challenge expired; ask for new options.")
        }
        return challenge
    }

    /// A WebAuthn decoding step whose failure is the client's: its code goes out as is.
    func webAuthn<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as WebAuthnError { throw APIError(e.code.rawValue, e.message) }
    }

    func admit(_ address: String) throws {
        if case .limited(let wait) = addressLimits.admitRequest(from: Self.addressKey(address), at: clock()) {
            metrics.rateLimited.increment()
            throw LoginServerError.tooManyAttempts(forAccount: false, retryAfter: Self.seconds(wait))
        }
    }

    /// What limits count per: an IPv4 address, an IPv6 /64, else the text as given.
    static func addressKey(_ address: String) -> String { IPAddress(address)?.limitKey ?? address }

    /// What the username's per-address failure keys start with (usernames hold no spaces).
    static func addressPasswordKeyPrefix(_ username: String) -> String { "password \(username) from " }

    /// The username's own failure key (the one that locks; a success anywhere clears it).
    static func accountPasswordKey(_ username: String) -> String { "password \(username)" }

    static func seconds(_ wait: Double) -> Int { max(1, Int(wait.rounded(.up))) }

    static func normalized(_ username: String) throws -> String {
        let name = username.trimmingCharacters(in: .whitespaces).lowercased()
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz0123456789._-@")
        guard (1...64).contains(name.count), name.unicodeScalars.allSatisfy(allowed.contains) else {
            throw APIError(.invalidUsername, "A username has 1 to 64 of a–z, 0–9, '.', '_', '-', '@'.")
        }
        return name
    }

    static func deviceName(_ name: String?) throws -> String? {
        guard let name = name?.trimmingCharacters(in: .whitespacesAndNewlines), !name.isEmpty else { return nil }
        // Names are printed by clients in terminals and pages: no control or format characters
        // (escape sequences, bidi overrides, zero-width marks).
        guard name.count <= 64,
            !name.unicodeScalars.contains(where: {
                $0.properties.generalCategory == .control || $0.properties.generalCategory == .format
            })
        else {
            throw APIError(.malformedRequest, "A device name has at most 64 printable characters.")
        }
        return name
    }

    static func device(_ c: Credential) -> DeviceResponse {
        var device = DeviceResponse(
            id: c.id.base64URLEncodedString(),
            name: c.name,
            createdAt: c.createdAt,
            lastUsedAt: c.lastUsedAt,
            signCount: c.signCount,
            attestationFormat: c.attestationFormat
        )
        if c.aaguid.count == 16 {
            device.aaguid = UUID(uuid: c.aaguid.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }).uuidString
                .lowercased()
        }
        device.transports = c.transports
        device.backupEligible = c.backupEligible
        device.backedUp = c.backedUp
        device.userVerified = c.userVerifiedAtRegistration
        device.attestedKey = c.attestedKey
        return device
    }

    /// The transports a browser reported, as far as WebAuthn names them (at most 8, each short).
    static func transports(_ reported: [String]?) -> [String] {
        let known: Set = ["usb", "nfc", "ble", "smart-card", "hybrid", "internal", "cable"]
        return Array((reported ?? []).filter(known.contains).prefix(8))
    }

    static func activity(_ e: AccountEvent) -> ActivityResponse {
        ActivityResponse(
            at: e.at,
            kind: e.kind.rawValue,
            deviceID: e.credentialID?.base64URLEncodedString(),
            deviceName: e.deviceName,
            address: e.address
        )
    }

    static func tokenHash(_ token: String) -> Data { Data(SHA256.hash(data: Data(token.utf8))) }

    /// The kernel's random bytes, 8 at a time (swift-crypto's `SymmetricKey`): drawing them one
    /// byte at a time from `SystemRandomNumberGenerator` made a system call per byte, 48 a login.
    static func random(_ count: Int) -> Data {
        SymmetricKey(size: SymmetricKeySize(bitCount: count * 8)).withUnsafeBytes { Data($0) }
    }
}

/// The deployment secret, read from the store once.
final class SecretCache: Sendable {
    private let cached = Mutex<Data?>(nil)

    func value(_ load: () async throws -> Data) async throws -> Data {
        if let known = cached.withLock({ $0 }) { return known }
        let loaded = try await load()
        cached.withLock { $0 = loaded }
        return loaded
    }
}

/// A value made on first use and kept.
final class MadeOnce<Value: Sendable>: Sendable {
    private let made = Mutex<Value?>(nil)

    func value(_ make: () throws -> Value) throws -> Value {
        try made.withLock { value in
            if let value { return value }
            let new = try make()
            value = new
            return new
        }
    }
}
