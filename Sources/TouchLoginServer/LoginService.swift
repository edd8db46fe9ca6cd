import Crypto
import Foundation
import KeyAttestation
import Logging
import Synchronization
import TouchLoginAPI
import WebAuthn

/// The login server's rules, apart from HTTP: accounts, sessions, device binding and passkey
/// login, limits against guessing and flooding. Every method either returns the answer or throws
/// an `APIError` (or `RateLimited`).
public struct LoginService: Sendable {
    public let store: any LoginStore
    public let configuration: ServerConfiguration
    public let metrics: LoginMetrics
    let hasher: PasswordHasher
    let passwordWork: PasswordWork
    let addressLimits: AddressLimits
    let secret = SecretCache()
    let clock: @Sendable () -> Double
    let logger: Logger

    public init(store: any LoginStore, configuration: ServerConfiguration, metrics: LoginMetrics = LoginMetrics(),
                logger: Logger = Logger(label: "touchlogin-server"),
                clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.store = store
        self.configuration = configuration
        self.metrics = metrics
        self.hasher = PasswordHasher(cost: configuration.passwordCost)
        self.passwordWork = PasswordWork(limit: configuration.passwordChecksAtOnce)
        self.addressLimits = AddressLimits(configuration.rateLimits)
        self.clock = clock
        self.logger = logger
    }

    // MARK: Accounts and passwords

    public func createAccount(_ r: CreateAccountRequest, address: String) async throws -> SessionResponse {
        try admit(address)
        let username = try Self.normalized(r.username)
        let hash = try await newPasswordHash(r.password)
        let account = Account(id: UUID().uuidString.lowercased(), username: username, passwordHash: hash,
                              userHandle: Self.random(32), createdAt: clock())
        do { try await store.createAccount(account) } catch LoginStoreError.duplicate {
            throw APIError(.accountExists, "That username is taken.")
        }
        logger.info("account created", metadata: ["account": "\(account.id)"])
        return try await startSession(for: account, event: .signUp, address: address)
    }

    public func passwordLogin(_ r: PasswordLoginRequest, address: String) async throws -> SessionResponse {
        try admit(address)
        let account = try await checkPassword(r.password, username: (try? Self.normalized(r.username)) ?? "", address: address)
        metrics.passwordLogins.success()
        return try await startSession(for: account, event: .passwordLogin, address: address)
    }

    /// A step-up: the account's password typed again into a live session, which may then change
    /// the account's devices for `ServerConfiguration.stepUpWindow` seconds.
    public func confirmPassword(session: Session, account: Account, _ r: PasswordConfirmationRequest, address: String) async throws {
        try admit(address)
        _ = try await checkPassword(r.password, username: account.username, address: address)
        try await store.markPasswordVerified(tokenHash: session.tokenHash, at: clock())
        logger.info("password confirmed", metadata: ["account": "\(account.id)"])
    }

    /// A new password for the account: proved by the current one, or by a step-up in this session.
    /// Every other session of the account ends (whoever knew the old password is signed out).
    public func changePassword(session: Session, account: Account, _ r: PasswordChangeRequest, address: String) async throws {
        if let current = r.currentPassword {
            try admit(address)
            _ = try await checkPassword(current, username: account.username, address: address)
        } else {
            try requireFreshPassword(session)
        }
        let hash = try await newPasswordHash(r.newPassword)
        let now = clock()
        try await store.changePassword(accountID: account.id, hash: hash, keepingSession: session.tokenHash, verifiedAt: now,
                                       clearingFailures: Self.accountPasswordKey(account.username),
                                       event: AccountEvent(accountID: account.id, at: now, kind: .passwordChanged, address: address))
        logger.info("password changed", metadata: ["account": "\(account.id)"])
    }

    /// The scrypt hash of a new password that meets the rules (8 characters to 256 bytes).
    private func newPasswordHash(_ password: String) async throws -> String {
        guard password.count >= 8 else { throw APIError(.weakPassword, "A password needs at least 8 characters.") }
        guard password.utf8.count <= 256 else { throw APIError(.weakPassword, "A password may have at most 256 bytes.") }
        let hasher = self.hasher
        return try await passwordWork.run { try hasher.hash(password) }
    }

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
        guard let id = Data(base64URLEncoded: credentialID), let credential = try await store.credentials(accountID: account.id).first(where: { $0.id == id }) else {
            throw APIError(.notFound, "No such device on this account.")
        }
        let event = AccountEvent(accountID: account.id, at: clock(), kind: .deviceRevoked, credentialID: id, deviceName: credential.name, address: "operator")
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
        guard let token, !token.isEmpty, token.utf8.count <= 128 else { throw APIError(.unauthorized, "Sign in first (Authorization: Bearer <token>).") }
        guard let session = try await store.session(tokenHash: Self.tokenHash(token)), session.expiresAt > clock(),
              let account = try await store.account(id: session.accountID) else {
            throw APIError(.unauthorized, "The session has ended or was never valid; sign in again.")
        }
        return (session, account)
    }

    public func accountInfo(_ account: Account) async throws -> AccountResponse {
        AccountResponse(username: account.username, createdAt: account.createdAt, devices: try await devices(of: account),
                        activity: try await store.events(accountID: account.id, limit: 50).map(Self.activity))
    }

    /// Forgets expired sessions and challenges and long-idle failure records (the server runs it
    /// every minute, off the login path).
    public func removeExpired() async throws {
        let now = clock()
        try await store.removeExpired(now: now, failuresIdleSince: now - configuration.failureMemory,
                                      lockAt: configuration.rateLimits.passwordPerAccount.lockAfter, eventsBefore: now - configuration.activityMemory)
    }

    // MARK: Devices (registration)

    public func registrationOptions(session: Session, account: Account, _ r: RegistrationOptionsRequest) async throws -> RegistrationOptionsResponse {
        try requireFreshPassword(session)
        let challenge = Self.random(32)
        let name = try Self.deviceName(r.deviceName)
        try await store.storeChallenge(Challenge(value: challenge, purpose: .registration, accountID: account.id, sessionTokenHash: session.tokenHash,
                                                 deviceName: name, expiresAt: clock() + configuration.challengeLifetime))
        let existing = try await store.credentials(accountID: account.id)
        return RegistrationOptionsResponse(publicKey: PublicKeyCredentialCreationOptionsJSON(
            rp: .init(id: configuration.relyingParty.id, name: configuration.relyingPartyName),
            user: .init(id: account.userHandle.base64URLEncodedString(), name: account.username, displayName: account.username),
            challenge: challenge.base64URLEncodedString(),
            // ES256 (laenclaved's keys, most authenticators), then EdDSA and RS256 for browsers.
            pubKeyCredParams: PublicKeyCredentialParameters.supported,
            timeout: UInt32(configuration.challengeLifetime * 1000),
            excludeCredentials: existing.map { .init(type: "public-key", id: $0.id.base64URLEncodedString(), transports: nil) },
            authenticatorSelection: .init(residentKey: "preferred", userVerification: configuration.requireUserVerification ? "required" : "preferred"),
            // "direct" where this server will check it; browsers then ask the user's consent.
            attestation: configuration.attestation?.applies(to: r.kind ?? .passkey) == true ? "direct" : "none"))
    }

    public func register(session: Session, account: Account, _ r: RegistrationRequest, address: String) async throws -> DeviceResponse {
        try requireFreshPassword(session)
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
        var attested: AttestationTrust.AttestedKey?
        if let trust = configuration.attestation, trust.applies(to: r.kind ?? .passkey) {
            do { attested = try await trust.check(verified, now: Date(timeIntervalSince1970: clock()), logger: logger) } catch {
                metrics.registrations.failure()
                logger.notice("device key refused", metadata: ["account": "\(account.id)", "why": "\(error)"])
                throw error
            }
        }
        let name = try Self.deviceName(r.deviceName) ?? challenge.deviceName ?? "device"
        var credential = Credential(id: verified.credentialID, accountID: account.id, publicKey: verified.publicKeyCBOR, signCount: verified.signCount,
                                    name: name, attestationFormat: verified.attestationFormat, createdAt: clock(), lastUsedAt: nil,
                                    aaguid: verified.aaguid, transports: Self.transports(r.credential.response.transports))
        credential.backupEligible = verified.backupEligible
        credential.backedUp = verified.backedUp
        credential.userVerifiedAtRegistration = verified.userVerified
        credential.attestedKey = attested?.summary
        let event = AccountEvent(accountID: account.id, at: credential.createdAt, kind: .deviceAdded, credentialID: credential.id, deviceName: name, address: address)
        do {
            // A decoy's ID answers as a taken one: registering it must not tell that no one has it.
            if Decoy(credentialID: credential.id, key: try await secretKey()) != nil { throw LoginStoreError.duplicate }
            try await store.addCredential(credential, event: event)
        } catch LoginStoreError.duplicate {
            throw APIError(.credentialExists, "That credential is registered already.")
        }
        metrics.registrations.success()
        logger.info("device registered", metadata: ["account": "\(account.id)", "format": "\(verified.attestationFormat)"])
        return Self.device(credential)
    }

    /// A new name for one of the account's devices; like any change of devices, with the password
    /// typed recently (a name is what the owner recognises a device by).
    public func rename(session: Session, account: Account, credentialID: String, _ r: RenameDeviceRequest) async throws -> DeviceResponse {
        try requireFreshPassword(session)
        guard let name = try Self.deviceName(r.name) else { throw APIError(.malformedRequest, "A device needs a name.") }
        guard let id = Data(base64URLEncoded: credentialID), try await store.renameCredential(id: id, accountID: account.id, name: name),
              let renamed = try await store.credentials(accountID: account.id).first(where: { $0.id == id }) else {
            throw APIError(.notFound, "No such device on this account.")
        }
        return Self.device(renamed)
    }

    public func devices(of account: Account) async throws -> [DeviceResponse] {
        try await store.credentials(accountID: account.id).map(Self.device)
    }

    /// A session may revoke the credential it logged in with (a device turning its own fingerprint
    /// login off); any other needs a fresh password, like binding.
    public func revoke(session: Session, account: Account, credentialID: String, address: String) async throws {
        let id = Data(base64URLEncoded: credentialID)
        if id == nil || id != session.credentialID { try requireFreshPassword(session) }
        let name = try await store.credentials(accountID: account.id).first { $0.id == id }?.name
        let event = AccountEvent(accountID: account.id, at: clock(), kind: .deviceRevoked, credentialID: id, deviceName: name, address: address)
        guard let id, try await store.deleteCredential(id: id, accountID: account.id, event: event, keepingSession: session.tokenHash) else {
            throw APIError(.notFound, "No such device on this account.")
        }
        logger.info("device revoked", metadata: ["account": "\(account.id)"])
    }

    // MARK: Passkey login (assertion)

    public func assertionOptions(_ r: AssertionOptionsRequest, address: String) async throws -> AssertionOptionsResponse {
        try admit(address)
        let key = try await secretKey()
        var allowed: [PublicKeyCredentialDescriptorJSON] = []
        var binding = SignedChallenge.unbound
        if let name = r.username {
            // One look-up whether the account exists or not, and a decoy where it has no
            // credential: the answer does not tell which names are accounts.
            let username = (try? Self.normalized(name)) ?? name
            let credentials = try await store.credentials(username: username)
            binding = Self.binding(accountID: credentials.first?.accountID, username: username, key)
            allowed = credentials.isEmpty
                ? [.init(type: "public-key", id: Decoy.credentialID(binding: binding, key: key).base64URLEncodedString(), transports: Decoy.transports)]
                : credentials.map { .init(type: "public-key", id: $0.id.base64URLEncodedString(), transports: $0.transports.isEmpty ? nil : $0.transports) }
        }
        // Signed, not stored: asking for options writes nothing.
        let challenge = SignedChallenge(purpose: .authentication, expiresAt: clock() + configuration.challengeLifetime,
                                        nonce: Self.random(16), binding: binding)
        return AssertionOptionsResponse(publicKey: PublicKeyCredentialRequestOptionsJSON(
            challenge: challenge.sealed(with: key).base64URLEncodedString(), timeout: UInt32(configuration.challengeLifetime * 1000),
            rpId: configuration.relyingParty.id, allowCredentials: allowed,
            userVerification: configuration.requireUserVerification ? "required" : "preferred"))
    }

    public func passkeyLogin(_ r: AssertionRequest, address: String) async throws -> SessionResponse {
        try admit(address)
        let addressKey = Self.addressKey(address)
        if case .limited(let wait) = addressLimits.mayTryPasskey(from: addressKey, at: clock()) {
            metrics.rateLimited.increment()
            throw RateLimited(retryAfter: Self.seconds(wait), scope: .address)
        }
        do {
            let session = try await completeAssertion(r, address: address)
            metrics.passkeyLogins.success()
            return session
        } catch let e as APIError {
            // A refused assertion costs the address, never the account: a signature cannot be
            // guessed, so an account count would only let anyone lock the owner out.
            addressLimits.passkeyFailed(from: addressKey, at: clock())
            metrics.passkeyLogins.failure()
            logger.notice("passkey login refused", metadata: ["code": "\(e.code)", "address": "\(address)"])
            throw e
        }
    }

    /// Verifies the assertion, then completes the login in one transaction: the challenge used,
    /// the counter advanced, the session made, the password lock lifted (the owner proved
    /// possession of a device). A refused assertion leaves its challenge usable until it expires
    /// (the per-address passkey limit bounds the tries).
    private func completeAssertion(_ r: AssertionRequest, address: String) async throws -> SessionResponse {
        let credentialID = try webAuthn { try r.credential.decodedRawID }
        let clientDataJSON = try webAuthn { try r.credential.decodedClientDataJSON }
        let authenticatorData = try webAuthn { try r.credential.decodedAuthenticatorData }
        let signature = try webAuthn { try r.credential.decodedSignature }
        let userHandle = try webAuthn { try r.credential.decodedUserHandle }
        let key = try await secretKey()
        let (challenge, token) = try openChallenge(from: clientDataJSON, key: key)
        let credential: Credential, account: Account, decoy: Bool
        if let (found, owner) = try await store.credentialAndAccount(id: credentialID) {
            (credential, account, decoy) = (found, owner, false)
        } else if let stand = Decoy(credentialID: credentialID, key: key) {
            (credential, account, decoy) = (stand.credential, stand.account, true)
        } else {
            throw Self.unregisteredDevice
        }
        if challenge.isBound {
            // Options for a name are answered only with that name's devices (or its decoy).
            let named = decoy ? Decoy.credentialID(binding: challenge.binding, key: key) == credentialID
                              : challenge.binding == Self.binding(accountID: account.id, username: account.username, key)
            guard named else { throw APIError(.unknownCredential, "This device is not registered for that account.") }
        }
        func verify() throws -> VerifiedAssertion { try webAuthn {
            // Without a username the credential alone names the account: the authenticator must
            // confirm whose it is (WebAuthn §7.2 step 6).
            if !challenge.isBound, userHandle == nil {
                throw WebAuthnError(.credentialIDMismatch, "a login without a username needs the authenticator's userHandle")
            }
            if let userHandle, userHandle != account.userHandle {
                throw WebAuthnError(.credentialIDMismatch, "userHandle does not belong to the credential's account")
            }
            let verified = try WebAuthnVerifier.verifyAssertion(
                credentialID: credentialID, clientDataJSON: clientDataJSON, authenticatorData: authenticatorData,
                signature: signature, userHandle: userHandle, expectedChallenge: token,
                relyingParty: configuration.relyingParty, credentialPublicKey: try COSEKey(cbor: credential.publicKey),
                storedSignCount: credential.signCount, requireUserVerification: configuration.requireUserVerification)
            // BE is fixed for a credential's life (WebAuthn §6.1.3): a change means another authenticator.
            guard verified.backupEligible == credential.backupEligible else {
                throw WebAuthnError(.credentialIDMismatch, "the backup eligibility (BE) differs from the one registered")
            }
            return verified
        } }
        let verified: VerifiedAssertion
        do {
            verified = try verify()
        } catch let e as APIError where e.code == WebAuthnError.Code.counterRegression.rawValue {
            // The same assertion again: the counter refuses it before the nonce is looked at; say why.
            if try await store.isChallengeUsed(nonce: challenge.nonce) {
                throw APIError(.challengeUnknown, "Unknown or already used challenge; ask for new options.")
            }
            throw e
        }
        // Unreachable while the stand-in's key is what it is (no private half anywhere); kept so
        // that no change to it could ever sign anyone in as no one.
        guard !decoy else { throw Self.unregisteredDevice }
        var (response, session) = newSession(for: account, method: "passkey", credentialID: credentialID)
        let outcome = try await store.completePasskeyLogin(PasskeyLoginCompletion(
            challengeNonce: challenge.nonce, challengeExpiresAt: challenge.expiresAt, credentialID: credentialID,
            expectedSignCount: credential.signCount, newSignCount: verified.signCount, backedUp: verified.backedUp, session: session,
            clearingFailures: Self.accountPasswordKey(account.username),
            event: AccountEvent(accountID: account.id, at: session.createdAt, kind: .passkeyLogin, credentialID: credentialID,
                                deviceName: credential.name, address: address),
            // Announced to this device: what was bound since it last logged in.
            announcingDevicesAddedSince: credential.lastUsedAt ?? credential.createdAt))
        switch outcome {
        case .completed(let added):
            response.newDevices = added.map(Self.device)
            return response
        case .challengeUsed: throw APIError(.challengeUnknown, "Unknown or already used challenge; ask for new options.")
        case .counterMoved: throw APIError(WebAuthnError.Code.counterRegression.rawValue, "the sign counter moved meanwhile (a concurrent replay)")
        }
    }

    static let unregisteredDevice = APIError(.unknownCredential, "This device is not registered (or was revoked); sign in with the password.")

    /// The signed challenge named in clientDataJSON, checked for origin (ours), purpose and age.
    private func openChallenge(from clientDataJSON: Data, key: SymmetricKey) throws -> (SignedChallenge, Data) {
        let clientData: CollectedClientData
        do { clientData = try CollectedClientData(json: clientDataJSON) } catch let e as WebAuthnError { throw APIError(e.code.rawValue, e.message) }
        do {
            guard let token = Data(base64URLEncoded: clientData.challenge) else { throw SignedChallenge.Problem.unknown }
            let challenge = try SignedChallenge.open(token, with: key, at: clock())
            guard challenge.purpose == .authentication else { throw SignedChallenge.Problem.unknown }
            return (challenge, token)
        } catch SignedChallenge.Problem.expired {
            throw APIError(.challengeExpired, "The challenge expired; ask for new options.")
        } catch {
            throw APIError(.challengeUnknown, "Unknown or already used challenge; ask for new options.")
        }
    }

    // MARK: Shared steps

    /// A session made by typing the password (a sign-up or a password login).
    private func startSession(for account: Account, event: AccountEvent.Kind, address: String) async throws -> SessionResponse {
        let now = clock()
        let (response, session) = newSession(for: account, method: "password", passwordVerifiedAt: now)
        try await store.createSession(session, event: AccountEvent(accountID: account.id, at: now, kind: event, address: address))
        return response
    }

    /// A new bearer token and the session row that stands for it (the store keeps only its hash).
    private func newSession(for account: Account, method: String, passwordVerifiedAt: Double? = nil, credentialID: Data? = nil) -> (SessionResponse, Session) {
        let token = Self.random(32).base64URLEncodedString()
        let now = clock()
        let session = Session(tokenHash: Self.tokenHash(token), accountID: account.id, createdAt: now,
                              expiresAt: now + configuration.sessionLifetime, method: method,
                              passwordVerifiedAt: passwordVerifiedAt, credentialID: credentialID)
        return (SessionResponse(token: token, username: account.username, expiresAt: session.expiresAt, method: method), session)
    }

    /// The password check behind every password entry: counted before it is made (so parallel
    /// guesses cannot outrun the count), per username and per address and username, on the
    /// schedules of `RateLimits`; an unknown username costs and answers exactly as a known one.
    private func checkPassword(_ password: String, username: String, address: String) async throws -> Account {
        let keys = Self.passwordKeys(username: username, addressKey: Self.addressKey(address))
        let now = clock()
        let limits = configuration.rateLimits
        let decision = try await store.admitAttempt(keys: keys, at: now) { records in
            limits.passwordPerAccount.decide(records[keys[0]], at: now).combined(with: limits.passwordPerAddressAndAccount.decide(records[keys[1]], at: now))
        }
        switch decision {
        case .admitted: break
        case .wait(let seconds):
            metrics.rateLimited.increment()
            throw RateLimited(retryAfter: Self.seconds(seconds), scope: .account)
        case .locked:
            metrics.rateLimited.increment()
            throw APIError(.passwordLocked, "Password sign-in for this account is locked after too many failed attempts; sign in with a passkey, or ask the operator to lift it.")
        }
        let account = try await store.account(named: username)
        let stored = account?.passwordHash, hasher = self.hasher
        let matches = try await passwordWork.run {
            guard let stored else { hasher.burn(password); return false }
            return hasher.verify(password, against: stored)
        }
        guard matches, let account else {
            metrics.passwordLogins.failure()
            logger.notice("password refused", metadata: ["username": "\(username)", "address": "\(address)"])
            throw APIError(.invalidCredentials, "Wrong username or password.")
        }
        try await store.clearFailures(keys: keys)
        if let stored, hasher.needsRehash(stored) {
            // Made at a lower cost (before the default rose): remade now, the one time the password
            // is known. Best effort: a busy pool or a store error leaves the old hash for next time,
            // never fails the login.
            do {
                let remade = try await passwordWork.run { try hasher.hash(password) }
                if try await store.rehashPassword(accountID: account.id, from: stored, to: remade) {
                    logger.info("password hash remade at today's cost", metadata: ["username": "\(username)"])
                }
            } catch {
                logger.notice("password hash not remade this time", metadata: ["username": "\(username)", "error": "\(error)"])
            }
        }
        return account
    }

    private func requireFreshPassword(_ session: Session) throws {
        guard let verified = session.passwordVerifiedAt, clock() - verified <= configuration.stepUpWindow else {
            throw APIError(.stepUpRequired, "Changing this account's devices needs its password typed again (POST /api/session/password).")
        }
    }

    /// The deployment's secret as a MAC key (read from the store once). A short one (a store
    /// answering with nothing) would make every challenge MAC and decoy forgeable: it stops the
    /// request instead.
    private func secretKey() async throws -> SymmetricKey {
        let value = try await secret.value { try await store.secret() }
        guard value.count >= 32 else { throw APIError(.unavailable, "The server's secret is missing from its database.") }
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

    private func admit(_ address: String) throws {
        if case .limited(let wait) = addressLimits.admitRequest(from: Self.addressKey(address), at: clock()) {
            metrics.rateLimited.increment()
            throw RateLimited(retryAfter: Self.seconds(wait), scope: .address)
        }
    }

    /// What limits count per: an IPv4 address, an IPv6 /64, else the text as given.
    static func addressKey(_ address: String) -> String { IPAddress(address)?.limitKey ?? address }

    /// The failure keys of a password entry: the username's, and the address's for that username.
    static func passwordKeys(username: String, addressKey: String) -> [String] {
        [accountPasswordKey(username), addressPasswordKeyPrefix(username) + addressKey]
    }

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
        guard name.count <= 64, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }) else {
            throw APIError(.malformedRequest, "A device name has at most 64 printable characters.")
        }
        return name
    }

    static func device(_ c: Credential) -> DeviceResponse {
        var device = DeviceResponse(id: c.id.base64URLEncodedString(), name: c.name, createdAt: c.createdAt, lastUsedAt: c.lastUsedAt,
                                    signCount: c.signCount, attestationFormat: c.attestationFormat)
        if c.aaguid.count == 16 { device.aaguid = UUID(uuid: c.aaguid.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }).uuidString.lowercased() }
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
        ActivityResponse(at: e.at, kind: e.kind.rawValue, deviceID: e.credentialID?.base64URLEncodedString(), deviceName: e.deviceName, address: e.address)
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

/// Too many attempts: HTTP 429 with Retry-After.
public struct RateLimited: Error {
    public var retryAfter: Int
    public enum Scope: Sendable { case address, account }
    public var scope: Scope
}
