import Crypto
import Foundation
import KeyAttestation
import Logging
import Synchronization
import TouchLoginAPI
import WebAuthn

/// Devices: binding a device key after a password login, listing and revoking them.
extension LoginService {
    // MARK: Devices (registration)

    public func registrationOptions(
        session: Session,
        account: Account,
        _ r: RegistrationOptionsRequest
    ) async throws -> RegistrationOptionsResponse {
        try requireFreshPassword(session)
        let challenge = Self.random(32)
        let name = try Self.deviceName(r.deviceName)
        try await store.storeChallenge(
            Challenge(
                value: challenge,
                purpose: .registration,
                accountID: account.id,
                sessionTokenHash: session.tokenHash,
                deviceName: name,
                expiresAt: clock() + configuration.challengeLifetime
            )
        )
        let existing = try await store.credentials(accountID: account.id)
        return RegistrationOptionsResponse(
            publicKey: PublicKeyCredentialCreationOptionsJSON(
                rp: .init(id: configuration.relyingParty.id, name: configuration.relyingPartyName),
                user: .init(
                    id: account.userHandle.base64URLEncodedString(),
                    name: account.username,
                    displayName: account.username
                ),
                challenge: challenge.base64URLEncodedString(),
                // ES256 (laenclaved's keys, most authenticators), then EdDSA and RS256 for browsers.
                pubKeyCredParams: PublicKeyCredentialParameters.supported,
                timeout: UInt32(configuration.challengeLifetime * 1000),
                excludeCredentials: existing.map {
                    .init(type: "public-key", id: $0.id.base64URLEncodedString(), transports: nil)
                },
                authenticatorSelection: .init(
                    residentKey: "preferred",
                    userVerification: configuration.requireUserVerification ? "required" : "preferred"
                ),
                // "direct" where this server will check it; browsers then ask the user's consent.
                attestation: wantsAttestation(r.kind ?? .passkey) ? "direct" : "none",
                attestationFormats: attestationFormats(r.kind ?? .passkey)
            )
        )
    }

    public func register(
        session: Session,
        account: Account,
        _ r: RegistrationRequest,
        address: String
    ) async throws -> DeviceResponse {
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
                clientDataJSON: clientDataJSON,
                attestationObject: attestationObject,
                expectedChallenge: challenge.value,
                relyingParty: configuration.relyingParty,
                requireUserVerification: configuration.requireUserVerification
            )
        } catch let e as WebAuthnError {
            metrics.registrations.failure()
            throw APIError(e.code.rawValue, e.message)
        }
        guard credentialID == verified.credentialID else {
            throw APIError(
                WebAuthnError.Code.credentialIDMismatch.rawValue,
                "rawId differs from the attested credential ID."
            )
        }
        var attested: AttestationTrust.AttestedKey?
        var hardware: TPMDescription?
        do {
            hardware = try await hardwareRoot(of: verified)
            if let trust = configuration.attestation, trust.applies(to: r.kind ?? .passkey) {
                attested = try await trust.check(
                    verified,
                    chain: try keyCertificates(r, verified),
                    now: Date(timeIntervalSince1970: clock()),
                    logger: logger
                )
            }
        } catch {
            metrics.registrations.failure()
            logger.notice("device key refused", metadata: ["account": "\(account.id)", "why": "\(error)"])
            throw error
        }
        let name = try Self.deviceName(r.deviceName) ?? challenge.deviceName ?? "device"
        var credential = Credential(
            id: verified.credentialID,
            accountID: account.id,
            publicKey: verified.publicKeyCBOR,
            signCount: verified.signCount,
            name: name,
            attestationFormat: verified.attestationFormat,
            createdAt: clock(),
            lastUsedAt: nil,
            aaguid: verified.aaguid,
            transports: Self.transports(r.credential.response.transports)
        )
        credential.backupEligible = verified.backupEligible
        credential.backedUp = verified.backedUp
        credential.userVerifiedAtRegistration = verified.userVerified
        credential.attestedKey = AttestationTrust.summary(attested, hardware: hardware)
        let event = AccountEvent(
            accountID: account.id,
            at: credential.createdAt,
            kind: .deviceAdded,
            credentialID: credential.id,
            deviceName: name,
            address: address
        )
        do {
            // A decoy's ID answers as a taken one: registering it must not tell that no one has it.
            if Decoy(credentialID: credential.id, key: try await secretKey()) != nil {
                throw LoginServerError.duplicate
            }
            try await store.addCredential(credential, event: event)
        } catch let error as LoginServerError where error.code == .duplicate {
            throw APIError(.credentialExists, "That credential is registered already.")
        }
        metrics.registrations.success()
        logger.info(
            "device registered",
            metadata: ["account": "\(account.id)", "format": "\(verified.attestationFormat)"]
        )
        return Self.device(credential)
    }

    /// Whether registrations of `kind` are asked for an attestation ("direct").
    func wantsAttestation(_ kind: CredentialKind) -> Bool {
        configuration.attestation?.applies(to: kind) == true || attestationFormats(kind) != nil
    }

    /// The formats this server prefers for `kind` (WebAuthn L3 `attestationFormats`): `tpm` first
    /// where it certifies TPM attestation keys (for device keys; for every kind where it requires a
    /// hardware root), alone where it requires a hardware root.
    func attestationFormats(_ kind: CredentialKind) -> [String]? {
        guard let tpm = configuration.tpmAttestation, kind == .deviceKey || tpm.requireHardwareRoot else { return nil }
        return tpm.requireHardwareRoot
            ? [AttestationFormat.tpm.rawValue] : [AttestationFormat.tpm.rawValue, AttestationFormat.packed.rawValue]
    }

    /// The laenclaved chain that says how the key is guarded: a `packed` statement's own `x5c`; for a
    /// `tpm` statement (whose `x5c` is the aikCert's) the request's `keyCertificates` — taken only
    /// where this server checks the aikCert, which binds the key to this registration: a chain
    /// beside an unchecked statement would vouch for a key no one proved to hold.
    func keyCertificates(_ r: RegistrationRequest, _ verified: VerifiedRegistration) throws -> [Data] {
        guard verified.attestationFormat == AttestationFormat.tpm.rawValue else {
            return verified.attestationCertificates
        }
        guard configuration.tpmAttestation != nil else {
            throw APIError(
                .attestationUntrusted,
                "This server does not check tpm attestations (it was started without --tpm-maker-roots); register with a packed one."
            )
        }
        let encoded = r.keyCertificates ?? []
        guard encoded.count <= AttestationObject.maxCertificates else {
            throw APIError(
                .malformedRequest,
                "keyCertificates holds \(encoded.count) certificates; the limit is \(AttestationObject.maxCertificates)."
            )
        }
        return try encoded.map {
            guard let der = Data(base64URLEncoded: $0), der.count <= 4096 else {
                throw APIError(.malformedRequest, "A keyCertificates entry is not base64url DER of 4 KB at most.")
            }
            return der
        }
    }

    /// A new name for one of the account's devices; like any change of devices, with the password
    /// typed recently (a name is what the owner recognises a device by).
    public func rename(
        session: Session,
        account: Account,
        credentialID: String,
        _ r: RenameDeviceRequest
    ) async throws -> DeviceResponse {
        try requireFreshPassword(session)
        guard let name = try Self.deviceName(r.name) else {
            throw APIError(.malformedRequest, "A device needs a name.")
        }
        guard let id = Data(base64URLEncoded: credentialID),
            try await store.renameCredential(id: id, accountID: account.id, name: name),
            let renamed = try await store.credentials(accountID: account.id).first(where: { $0.id == id })
        else {
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
        let event = AccountEvent(
            accountID: account.id,
            at: clock(),
            kind: .deviceRevoked,
            credentialID: id,
            deviceName: name,
            address: address
        )
        guard let id,
            try await store.deleteCredential(
                id: id,
                accountID: account.id,
                event: event,
                keepingSession: session.tokenHash
            )
        else {
            throw APIError(.notFound, "No such device on this account.")
        }
        logger.info("device revoked", metadata: ["account": "\(account.id)"])
    }
}
