import Crypto
import Foundation
import Logging
import TouchLoginAPI
import WebAuthn

/// The login server's rules, apart from HTTP: accounts, sessions, device binding and passkey
/// login, rate limits. Every method either returns the answer or throws an `APIError`.
public struct LoginService: Sendable {
    public let store: any LoginStore
    public let configuration: ServerConfiguration
    public let metrics: LoginMetrics
    let hasher: PasswordHasher
    let clock: @Sendable () -> Double
    let logger: Logger

    public init(store: any LoginStore, configuration: ServerConfiguration, metrics: LoginMetrics = LoginMetrics(),
                logger: Logger = Logger(label: "touchlogin-server"),
                clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.store = store
        self.configuration = configuration
        self.metrics = metrics
        self.hasher = PasswordHasher(cost: configuration.passwordCost)
        self.clock = clock
        self.logger = logger
    }

    // MARK: Accounts and passwords

    public func createAccount(_ r: CreateAccountRequest, address: String) async throws -> SessionResponse {
        try await admit(address: address)
        let username = try Self.normalized(r.username)
        guard r.password.count >= 8 else { throw APIError(.weakPassword, "A password needs at least 8 characters.") }
        guard r.password.utf8.count <= 256 else { throw APIError(.weakPassword, "A password may have at most 256 bytes.") }
        let account = Account(id: UUID().uuidString.lowercased(), username: username, passwordHash: try hasher.hash(r.password),
                              userHandle: Self.random(32), createdAt: clock())
        do { try await store.createAccount(account) } catch LoginStoreError.duplicate {
            throw APIError(.accountExists, "That username is taken.")
        }
        logger.info("account created", metadata: ["account": "\(account.id)"])
        return try await startSession(for: account, method: "password")
    }

    public func passwordLogin(_ r: PasswordLoginRequest, address: String) async throws -> SessionResponse {
        try await admit(address: address)
        let username = (try? Self.normalized(r.username)) ?? ""
        guard let account = try await store.account(named: username) else {
            hasher.burn(r.password)
            metrics.passwordLogins.failure()
            throw APIError(.invalidCredentials, "Wrong username or password.")
        }
        try await checkFailures(of: account)
        guard hasher.verify(r.password, against: account.passwordHash) else {
            _ = try await store.countEvent(key: "failures:\(account.id)", windowStart: configuration.rateLimits.failuresPerAccount.windowStart(at: clock()))
            metrics.passwordLogins.failure()
            logger.notice("password login failed", metadata: ["account": "\(account.id)", "address": "\(address)"])
            throw APIError(.invalidCredentials, "Wrong username or password.")
        }
        metrics.passwordLogins.success()
        return try await startSession(for: account, method: "password")
    }

    public func logout(token: String) async throws {
        try await store.deleteSession(tokenHash: Self.tokenHash(token))
    }

    /// The session and account behind a bearer token, or `unauthorized`.
    public func authenticate(bearer token: String?) async throws -> (Session, Account) {
        guard let token, !token.isEmpty, token.utf8.count <= 128 else { throw APIError(.unauthorized, "Sign in first (Authorization: Bearer <token>).") }
        guard let session = try await store.session(tokenHash: Self.tokenHash(token)), session.expiresAt > clock(),
              let account = try await store.account(id: session.accountID) else {
            throw APIError(.unauthorized, "The session has ended or was never valid; sign in again.")
        }
        return (session, account)
    }

    public func accountInfo(_ account: Account) async throws -> AccountResponse {
        AccountResponse(username: account.username, createdAt: account.createdAt, devices: try await devices(of: account))
    }

    // MARK: Devices (registration)

    public func registrationOptions(session: Session, account: Account, _ r: RegistrationOptionsRequest) async throws -> RegistrationOptionsResponse {
        let challenge = Self.random(32)
        let name = try Self.deviceName(r.deviceName)
        try await store.storeChallenge(Challenge(value: challenge, purpose: .registration, accountID: account.id, sessionTokenHash: session.tokenHash,
                                                 deviceName: name, expiresAt: clock() + configuration.challengeLifetime))
        let existing = try await store.credentials(accountID: account.id)
        return RegistrationOptionsResponse(publicKey: PublicKeyCredentialCreationOptionsJSON(
            rp: .init(id: configuration.relyingParty.id, name: configuration.relyingPartyName),
            user: .init(id: account.userHandle.base64URLEncodedString(), name: account.username, displayName: account.username),
            challenge: challenge.base64URLEncodedString(),
            pubKeyCredParams: [.init(type: "public-key", alg: -7)],
            timeout: UInt32(configuration.challengeLifetime * 1000),
            excludeCredentials: existing.map { .init(type: "public-key", id: $0.id.base64URLEncodedString(), transports: nil) },
            authenticatorSelection: .init(residentKey: "preferred", userVerification: configuration.requireUserVerification ? "required" : "preferred"),
            attestation: "none"))
    }

    public func register(session: Session, account: Account, _ r: RegistrationRequest) async throws -> DeviceResponse {
        let credentialID = try webAuthn { try r.credential.decodedRawID }
        let clientDataJSON = try webAuthn { try r.credential.decodedClientDataJSON }
        let attestationObject = try webAuthn { try r.credential.decodedAttestationObject }
        let challenge = try await takeChallenge(from: clientDataJSON, purpose: .registration)
        guard challenge.accountID == account.id, challenge.sessionTokenHash == session.tokenHash else {
            throw APIError(.challengeUnknown, "That challenge was issued to another session.")
        }
        let verified: VerifiedRegistration
        do {
            verified = try WebAuthnVerifier.verifyRegistration(
                clientDataJSON: clientDataJSON, attestationObject: attestationObject, expectedChallenge: challenge.value,
                relyingParty: configuration.relyingParty, requireUserVerification: configuration.requireUserVerification)
        } catch let e as WebAuthnError {
            metrics.registrations.failure()
            throw APIError(e.code.rawValue, e.message)
        }
        guard credentialID == verified.credentialID else {
            throw APIError(WebAuthnError.Code.credentialIDMismatch.rawValue, "rawId differs from the attested credential ID.")
        }
        let name = try Self.deviceName(r.deviceName) ?? challenge.deviceName ?? "device"
        let credential = Credential(id: verified.credentialID, accountID: account.id, publicKey: verified.publicKeyCBOR, signCount: verified.signCount,
                                    name: name, attestationFormat: verified.attestationFormat, createdAt: clock(), lastUsedAt: nil)
        do { try await store.addCredential(credential) } catch LoginStoreError.duplicate {
            throw APIError(.credentialExists, "That credential is registered already.")
        }
        metrics.registrations.success()
        logger.info("device registered", metadata: ["account": "\(account.id)", "format": "\(verified.attestationFormat)"])
        return Self.device(credential)
    }

    public func devices(of account: Account) async throws -> [DeviceResponse] {
        try await store.credentials(accountID: account.id).map(Self.device)
    }

    public func revoke(account: Account, credentialID: String) async throws {
        guard let id = Data(base64URLEncoded: credentialID), try await store.deleteCredential(id: id, accountID: account.id) else {
            throw APIError(.notFound, "No such device on this account.")
        }
        logger.info("device revoked", metadata: ["account": "\(account.id)"])
    }

    // MARK: Passkey login (assertion)

    public func assertionOptions(_ r: AssertionOptionsRequest, address: String) async throws -> AssertionOptionsResponse {
        try await admit(address: address)  // each one stores a challenge: counted, so no flood
        let challenge = Self.random(32)
        var allowed: [PublicKeyCredentialDescriptorJSON] = []
        var accountID: String?
        if let name = r.username, let username = try? Self.normalized(name), let account = try await store.account(named: username) {
            accountID = account.id
            allowed = try await store.credentials(accountID: account.id).map { .init(type: "public-key", id: $0.id.base64URLEncodedString(), transports: nil) }
        }
        try await store.storeChallenge(Challenge(value: challenge, purpose: .authentication, accountID: accountID, sessionTokenHash: nil,
                                                 deviceName: nil, expiresAt: clock() + configuration.challengeLifetime))
        return AssertionOptionsResponse(publicKey: PublicKeyCredentialRequestOptionsJSON(
            challenge: challenge.base64URLEncodedString(), timeout: UInt32(configuration.challengeLifetime * 1000),
            rpId: configuration.relyingParty.id, allowCredentials: allowed,
            userVerification: configuration.requireUserVerification ? "required" : "preferred"))
    }

    public func passkeyLogin(_ r: AssertionRequest, address: String) async throws -> SessionResponse {
        try await admit(address: address)
        let credentialID = try webAuthn { try r.credential.decodedRawID }
        let clientDataJSON = try webAuthn { try r.credential.decodedClientDataJSON }
        let authenticatorData = try webAuthn { try r.credential.decodedAuthenticatorData }
        let signature = try webAuthn { try r.credential.decodedSignature }
        let userHandle = try webAuthn { try r.credential.decodedUserHandle }
        let challenge = try await takeChallenge(from: clientDataJSON, purpose: .authentication)
        guard let credential = try await store.credential(id: credentialID),
              let account = try await store.account(id: credential.accountID) else {
            metrics.passkeyLogins.failure()
            throw APIError(.unknownCredential, "This device is not registered (or was revoked); sign in with the password.")
        }
        if let expected = challenge.accountID, expected != account.id {
            throw APIError(.unknownCredential, "This device is not registered for that account.")
        }
        try await checkFailures(of: account)
        do {
            if let userHandle, userHandle != account.userHandle {
                throw WebAuthnError(.credentialIDMismatch, "userHandle does not belong to the credential's account")
            }
            let verified = try WebAuthnVerifier.verifyAssertion(
                credentialID: credentialID, clientDataJSON: clientDataJSON, authenticatorData: authenticatorData,
                signature: signature, userHandle: userHandle, expectedChallenge: challenge.value,
                relyingParty: configuration.relyingParty, credentialPublicKey: try COSEKey(cbor: credential.publicKey),
                storedSignCount: credential.signCount, requireUserVerification: configuration.requireUserVerification)
            guard try await store.advanceSignCount(credentialID: credentialID, expected: credential.signCount, newCount: verified.signCount, usedAt: clock()) else {
                throw WebAuthnError(.counterRegression, "the sign counter moved meanwhile (a concurrent replay)")
            }
        } catch let e as WebAuthnError {
            _ = try await store.countEvent(key: "failures:\(account.id)", windowStart: configuration.rateLimits.failuresPerAccount.windowStart(at: clock()))
            metrics.passkeyLogins.failure()
            logger.notice("passkey login refused", metadata: ["account": "\(account.id)", "code": "\(e.code.rawValue)", "address": "\(address)"])
            throw APIError(e.code.rawValue, e.message)
        }
        metrics.passkeyLogins.success()
        return try await startSession(for: account, method: "passkey")
    }

    // MARK: Shared steps

    private func startSession(for account: Account, method: String) async throws -> SessionResponse {
        let token = Self.random(32).base64URLEncodedString()
        let now = clock()
        let session = Session(tokenHash: Self.tokenHash(token), accountID: account.id, createdAt: now,
                              expiresAt: now + configuration.sessionLifetime, method: method)
        try await store.createSession(session)
        return SessionResponse(token: token, username: account.username, expiresAt: session.expiresAt, method: method)
    }

    /// The challenge named in clientDataJSON, taken (single use) and checked for purpose and age.
    private func takeChallenge(from clientDataJSON: Data, purpose: Challenge.Purpose) async throws -> Challenge {
        let clientData: CollectedClientData
        do { clientData = try CollectedClientData(json: clientDataJSON) } catch let e as WebAuthnError { throw APIError(e.code.rawValue, e.message) }
        guard let value = Data(base64URLEncoded: clientData.challenge), value.count == 32,
              let challenge = try await store.takeChallenge(value), challenge.purpose == purpose else {
            throw APIError(.challengeUnknown, "Unknown or already used challenge; ask for new options.")
        }
        guard challenge.expiresAt > clock() else { throw APIError(.challengeExpired, "The challenge expired; ask for new options.") }
        return challenge
    }

    /// A WebAuthn decoding step whose failure is the client's: its code goes out as is.
    private func webAuthn<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as WebAuthnError { throw APIError(e.code.rawValue, e.message) }
    }

    private func admit(address: String) async throws {
        let rule = configuration.rateLimits.perAddress
        let now = clock()
        let count = try await store.countEvent(key: "address:\(address)", windowStart: rule.windowStart(at: now))
        if rule.exceeded(by: count) {
            metrics.rateLimited.increment()
            throw RateLimited(retryAfter: rule.retryAfter(at: now), scope: "address")
        }
    }

    private func checkFailures(of account: Account) async throws {
        let rule = configuration.rateLimits.failuresPerAccount
        let now = clock()
        if try await store.eventCount(key: "failures:\(account.id)", windowStart: rule.windowStart(at: now)) >= rule.limit {
            metrics.rateLimited.increment()
            throw RateLimited(retryAfter: rule.retryAfter(at: now), scope: "account")
        }
    }

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
        guard name.count <= 64, !name.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) }) else {
            throw APIError(.malformedRequest, "A device name has at most 64 printable characters.")
        }
        return name
    }

    static func device(_ c: Credential) -> DeviceResponse {
        DeviceResponse(id: c.id.base64URLEncodedString(), name: c.name, createdAt: c.createdAt, lastUsedAt: c.lastUsedAt,
                       signCount: c.signCount, attestationFormat: c.attestationFormat)
    }

    static func tokenHash(_ token: String) -> Data { Data(SHA256.hash(data: Data(token.utf8))) }

    static func random(_ count: Int) -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}

/// Too many attempts: HTTP 429 with Retry-After.
public struct RateLimited: Error {
    public var retryAfter: Int
    public var scope: String
}
