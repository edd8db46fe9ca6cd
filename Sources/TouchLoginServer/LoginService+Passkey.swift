import Crypto
import Foundation
import KeyAttestation
import Logging
import Synchronization
import TouchLoginAPI
import WebAuthn

/// Passkey login: the options, then the device's assertion.
extension LoginService {
    // MARK: Passkey login (assertion)

    public func assertionOptions(_ r: AssertionOptionsRequest, address: String) async throws -> AssertionOptionsResponse
    {
        try admit(address)
        let answerAt = ContinuousClock.now + .seconds(configuration.optionsFloor)
        let key = try await secretKey()
        var allowed: [PublicKeyCredentialDescriptorJSON] = []
        var binding = SignedChallenge.unbound
        if let name = r.username {
            // The same work whatever the name: one look-up of the same shape (a stand-in row for a
            // name without a passkey), one binding and one decoy made, each row turned into an entry
            // alike — so its time does not tell which names have a passkey (`touchlogin-bench
            // timing` measures it), and its shape tells only what one entry cannot hide: a name
            // with several devices lists several (docs/architecture.md, "No enumeration").
            let username = (try? Self.normalized(name)) ?? name
            let rows = try await store.listing(username: username)
            let owner = rows.first?.id == nil ? nil : rows.first?.accountID
            binding = Self.binding(accountID: owner, username: username, key)
            let decoy = Decoy.credentialID(binding: binding, key: key)
            allowed = rows.map { row in
                let transports = row.transports.map { $0.split(separator: ",").map(String.init) } ?? Decoy.transports
                return .init(
                    type: "public-key",
                    id: (row.id ?? decoy).base64URLEncodedString(),
                    transports: transports.isEmpty ? nil : transports
                )
            }
        }
        // Signed, not stored: asking for options writes nothing.
        let challenge = SignedChallenge(
            purpose: .authentication,
            expiresAt: clock() + configuration.challengeLifetime,
            nonce: Self.random(16),
            binding: binding
        )
        // What equal work leaves (a store's hit against its miss: 7–11 µs in SQLite), the floor hides.
        if r.username != nil { try await Task.sleep(until: answerAt, clock: .continuous) }
        return AssertionOptionsResponse(
            publicKey: PublicKeyCredentialRequestOptionsJSON(
                challenge: challenge.sealed(with: key).base64URLEncodedString(),
                timeout: UInt32(configuration.challengeLifetime * 1000),
                rpId: configuration.relyingParty.id,
                allowCredentials: allowed,
                userVerification: configuration.requireUserVerification ? "required" : "preferred"
            )
        )
    }

    public func passkeyLogin(_ r: AssertionRequest, address: String) async throws -> SessionResponse {
        try admit(address)
        // The budget of refused assertions is the address's for the credential it claims: a forger
        // spends their own, never that of others behind the same address (a NAT) with other devices.
        let budget = Self.passkeyBudgetKey(address: address, credentialID: try? r.credential.decodedRawID)
        if case .limited(let wait) = addressLimits.mayTryPasskey(budget, at: clock()) {
            metrics.rateLimited.increment()
            throw LoginServerError.tooManyAttempts(forAccount: false, retryAfter: Self.seconds(wait))
        }
        do {
            let session = try await completeAssertion(r, address: address)
            metrics.passkeyLogins.success()
            return session
        } catch let e as APIError {
            // A refused assertion costs the address, never the account: a signature cannot be
            // guessed, so an account count would only let anyone lock the owner out.
            addressLimits.passkeyFailed(budget, at: clock())
            metrics.passkeyLogins.failure()
            logger.notice("passkey login refused", metadata: ["code": "\(e.code)", "address": "\(address)"])
            throw e
        }
    }

    /// Verifies the assertion, then completes the login in one transaction: the challenge used,
    /// the counter advanced, the session made, the password lock lifted (the owner proved
    /// possession of a device). A refused assertion leaves its challenge usable until it expires
    /// (the passkey budget per address and claimed credential, and the per-address request limit, bound the tries).
    func completeAssertion(_ r: AssertionRequest, address: String) async throws -> SessionResponse {
        let credentialID = try webAuthn { try r.credential.decodedRawID }
        let clientDataJSON = try webAuthn { try r.credential.decodedClientDataJSON }
        let authenticatorData = try webAuthn { try r.credential.decodedAuthenticatorData }
        let signature = try webAuthn { try r.credential.decodedSignature }
        let userHandle = try webAuthn { try r.credential.decodedUserHandle }
        let key = try await secretKey()
        let (challenge, token) = try openChallenge(from: clientDataJSON, key: key)
        let credential: Credential
        let account: Account
        let decoy: Bool
        if let (found, owner) = try await store.credentialAndAccount(id: credentialID) {
            (credential, account, decoy) = (found, owner, false)
        } else if let stand = Decoy(credentialID: credentialID, key: key) {
            (credential, account, decoy) = (stand.credential, stand.account, true)
        } else {
            throw Self.unregisteredDevice
        }
        if challenge.isBound {
            // Options for a name are answered only with that name's devices (or its decoy).
            let named =
                decoy
                ? Decoy.credentialID(binding: challenge.binding, key: key) == credentialID
                : challenge.binding == Self.binding(accountID: account.id, username: account.username, key)
            guard named else { throw APIError(.unknownCredential, "This device is not registered for that account.") }
        }
        func verify() throws -> VerifiedAssertion {
            try webAuthn {
                // Without a username the credential alone names the account: the authenticator must
                // confirm whose it is (WebAuthn §7.2 step 6).
                if !challenge.isBound, userHandle == nil {
                    throw WebAuthnError(
                        .credentialIDMismatch,
                        "a login without a username needs the authenticator's userHandle"
                    )
                }
                if let userHandle, userHandle != account.userHandle {
                    throw WebAuthnError(.credentialIDMismatch, "userHandle does not belong to the credential's account")
                }
                let verified = try WebAuthnVerifier.verifyAssertion(
                    credentialID: credentialID,
                    clientDataJSON: clientDataJSON,
                    authenticatorData: authenticatorData,
                    signature: signature,
                    userHandle: userHandle,
                    expectedChallenge: token,
                    relyingParty: configuration.relyingParty,
                    credentialPublicKey: try COSEKey(cbor: credential.publicKey),
                    storedSignCount: credential.signCount,
                    requireUserVerification: configuration.requireUserVerification
                )
                // BE is fixed for a credential's life (WebAuthn §6.1.3): a change means another authenticator.
                guard verified.backupEligible == credential.backupEligible else {
                    throw WebAuthnError(
                        .credentialIDMismatch,
                        "the backup eligibility (BE) differs from the one registered"
                    )
                }
                return verified
            }
        }
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
        let outcome = try await store.completePasskeyLogin(
            PasskeyLoginCompletion(
                challengeNonce: challenge.nonce,
                challengeExpiresAt: challenge.expiresAt,
                credentialID: credentialID,
                expectedSignCount: credential.signCount,
                newSignCount: verified.signCount,
                backedUp: verified.backedUp,
                session: session,
                clearingFailures: Self.accountPasswordKey(account.username),
                event: AccountEvent(
                    accountID: account.id,
                    at: session.createdAt,
                    kind: .passkeyLogin,
                    credentialID: credentialID,
                    deviceName: credential.name,
                    address: address
                ),
                // Announced to this device: what was bound since it last logged in.
                announcingDevicesAddedSince: credential.lastUsedAt ?? credential.createdAt
            )
        )
        switch outcome {
        case .completed(let added):
            response.newDevices = added.map(Self.device)
            return response
        case .challengeUsed:
            throw APIError(.challengeUnknown, "Unknown or already used challenge; ask for new options.")
        case .counterMoved:
            throw APIError(
                WebAuthnError.Code.counterRegression.rawValue,
                "the sign counter moved meanwhile (a concurrent replay)"
            )
        }
    }

    /// What a refused assertion is counted against: the client address (an IPv6 /64) and the
    /// credential ID it claims (none when the request did not name one readably).
    static func passkeyBudgetKey(address: String, credentialID: Data?) -> String {
        "\(addressKey(address)) \(credentialID?.base64URLEncodedString() ?? "-")"
    }

    static let unregisteredDevice = APIError(
        .unknownCredential,
        "This device is not registered (or was revoked); sign in with the password."
    )

    /// The signed challenge named in clientDataJSON, checked for origin (ours), purpose and age.
    func openChallenge(from clientDataJSON: Data, key: SymmetricKey) throws -> (SignedChallenge, Data) {
        let clientData: CollectedClientData
        do { clientData = try CollectedClientData(json: clientDataJSON) } catch let e as WebAuthnError {
            throw APIError(e.code.rawValue, e.message)
        }
        do {
            guard let token = Data(base64URLEncoded: clientData.challenge) else {
                throw SignedChallenge.Problem.unknown
            }
            let challenge = try SignedChallenge.open(token, with: key, at: clock())
            guard challenge.purpose == .authentication else { throw SignedChallenge.Problem.unknown }
            return (challenge, token)
        } catch SignedChallenge.Problem.expired {
            throw APIError(.challengeExpired, "The challenge expired; ask for new options.")
        } catch {
            throw APIError(.challengeUnknown, "Unknown or already used challenge; ask for new options.")
        }
    }
}
