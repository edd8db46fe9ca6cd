import Crypto
import Foundation

/// Server-side verification of WebAuthn L3 ceremonies (§7.1 registration, §7.2 authentication)
/// for ES256 credentials. Pure functions: no storage, no clock. The caller supplies the
/// challenge it issued (single use, ≥ 16 random bytes) and the stored credential state, and
/// persists what comes back.
public enum WebAuthnVerifier {
    /// The shortest expected challenge accepted (§13.4.3 requires at least 16 random bytes). An
    /// empty or short expected challenge is almost certainly a lost session on the server, which
    /// must never verify.
    public static let minimumChallengeLength = 16

    /// Verifies a registration ceremony (§7.1).
    ///
    /// Always requires user presence (UP); requires user verification (UV) when asked. The caller
    /// must still check the credential ID is not already registered (§7.1 step 26).
    public static func verifyRegistration(
        clientDataJSON: Data,
        attestationObject: Data,
        expectedChallenge: Data,
        relyingParty: RelyingParty,
        requireUserVerification: Bool,
        allowedAlgorithms: [COSEKey.Algorithm] = COSEKey.Algorithm.allCases
    ) throws -> VerifiedRegistration {
        // Steps 5–12: the client data.
        let clientData = try CollectedClientData(json: clientDataJSON)
        try checkClientData(
            clientData,
            expectedType: "webauthn.create",
            expectedChallenge: expectedChallenge,
            relyingParty: relyingParty
        )
        // Step 13.
        let clientDataHash = Data(SHA256.hash(data: clientDataJSON))

        // Step 14: decode; the parse also enforces credential ID length (step 25), the BE/BS rule
        // (step 18) and that the credential key is one this module verifies.
        let attestation = try AttestationObject(attestationObject)
        let authenticatorData = attestation.authenticatorData
        // Step 19: one of the algorithms the options offered (pubKeyCredParams).
        let algorithm = attestation.credential.publicKey.algorithm
        guard allowedAlgorithms.contains(algorithm) else {
            throw WebAuthnError(
                .unsupportedAlgorithm,
                "the credential key's algorithm \(algorithm) (\(algorithm.rawValue)) was not offered"
            )
        }

        // Steps 15–17.
        try checkAuthenticatorData(
            authenticatorData,
            relyingParty: relyingParty,
            requireUserVerification: requireUserVerification
        )

        // Steps 21–22: the attestation statement.
        let certificates = try attestation.verifyStatement(clientDataHash: clientDataHash)

        let credential = attestation.credential
        return VerifiedRegistration(
            credentialID: credential.credentialID,
            publicKey: credential.publicKey,
            publicKeyCBOR: credential.publicKeyCBOR,
            signCount: authenticatorData.signCount,
            aaguid: credential.aaguid,
            userVerified: authenticatorData.flags.contains(.userVerified),
            backupEligible: authenticatorData.flags.contains(.backupEligible),
            backedUp: authenticatorData.flags.contains(.backedUp),
            attestationFormat: attestation.format,
            attestationCertificates: certificates,
            tpmPublicArea: attestation.format == AttestationFormat.tpm.rawValue
                ? attestation.statement["pubArea"]?.bytesValue : nil
        )
    }

    /// Verifies an authentication ceremony (§7.2) against a stored credential.
    ///
    /// - Parameters:
    ///   - credentialID: the response's raw credential ID; the caller looked up
    ///     `credentialPublicKey` and `storedSignCount` by it.
    ///   - signature: in WebAuthn's encoding for the key's algorithm: ASN.1 DER for ES256 (raw r‖s
    ///     is rejected), 64 bytes for EdDSA, the modulus' length for RS256.
    ///   - userHandle: the response's user handle, if any.
    ///   - allowCredentials: if the ceremony listed credentials, the listed IDs (§7.2 step 5).
    ///   - expectedUserHandle: the user handle of the credential's owner, to check a returned
    ///     `userHandle` against (§7.2 step 6). When the user was not identified beforehand, the
    ///     caller must look the credential up and compare owners itself.
    /// - Throws: `counterRegression` when either count is non-zero and the new one is not
    ///   strictly greater: a signal of a possibly cloned authenticator. The caller decides
    ///   whether to refuse, flag or allow; nothing has been persisted.
    public static func verifyAssertion(
        credentialID: Data,
        clientDataJSON: Data,
        authenticatorData: Data,
        signature: Data,
        userHandle: Data?,
        expectedChallenge: Data,
        relyingParty: RelyingParty,
        credentialPublicKey: COSEKey,
        storedSignCount: UInt32,
        requireUserVerification: Bool,
        allowCredentials: [Data]? = nil,
        expectedUserHandle: Data? = nil
    ) throws -> VerifiedAssertion {
        // Steps 5–6: the credential and its owner.
        guard (1...AuthenticatorData.maxCredentialIDLength).contains(credentialID.count) else {
            throw WebAuthnError(
                .credentialIDMismatch,
                "credential ID must be 1...\(AuthenticatorData.maxCredentialIDLength) bytes"
            )
        }
        if let allowCredentials, !allowCredentials.isEmpty, !allowCredentials.contains(credentialID) {
            throw WebAuthnError(.credentialIDMismatch, "credential was not in allowCredentials")
        }
        if let expectedUserHandle, let userHandle, userHandle != expectedUserHandle {
            throw WebAuthnError(.credentialIDMismatch, "user handle does not belong to the credential's owner")
        }

        // Steps 7–14: the client data.
        let clientData = try CollectedClientData(json: clientDataJSON)
        try checkClientData(
            clientData,
            expectedType: "webauthn.get",
            expectedChallenge: expectedChallenge,
            relyingParty: relyingParty
        )

        // Steps 15–18: the authenticator data. BE/BS consistency is enforced by the parse.
        let parsed = try AuthenticatorData(authenticatorData)
        if parsed.attestedCredential != nil {
            throw WebAuthnError(
                .malformedAuthenticatorData,
                "assertion authenticator data must not carry attested credential data"
            )
        }
        try checkAuthenticatorData(parsed, relyingParty: relyingParty, requireUserVerification: requireUserVerification)

        // Steps 19–20: the signature over authData ‖ SHA-256(clientDataJSON).
        let clientDataHash = Data(SHA256.hash(data: clientDataJSON))
        guard credentialPublicKey.isValidSignature(signature, for: parsed.raw + clientDataHash) else {
            throw WebAuthnError(.signatureInvalid, "assertion signature does not verify with the stored credential key")
        }

        // Step 21: the signature counter. All-zero means the authenticator has no counter.
        if storedSignCount != 0 || parsed.signCount != 0, parsed.signCount <= storedSignCount {
            throw WebAuthnError(
                .counterRegression,
                "signature counter \(parsed.signCount) is not greater than the stored \(storedSignCount); the authenticator may be cloned"
            )
        }

        return VerifiedAssertion(
            signCount: parsed.signCount,
            userVerified: parsed.flags.contains(.userVerified),
            backupEligible: parsed.flags.contains(.backupEligible),
            backedUp: parsed.flags.contains(.backedUp)
        )
    }

    // MARK: - Shared steps

    /// §7.1 steps 7–12 / §7.2 steps 10–14.
    static func checkClientData(
        _ clientData: CollectedClientData,
        expectedType: String,
        expectedChallenge: Data,
        relyingParty: RelyingParty
    ) throws {
        guard clientData.type == expectedType else {
            throw WebAuthnError(
                .wrongType,
                "client data type is \(WebAuthnError.quote(clientData.type)); expected \"\(expectedType)\""
            )
        }
        guard expectedChallenge.count >= minimumChallengeLength else {
            throw WebAuthnError(
                .challengeMismatch,
                "expected challenge is \(expectedChallenge.count) bytes; at least \(minimumChallengeLength) are required"
            )
        }
        // The spec compares the base64url strings; doing it in constant time keeps an attacker from
        // learning an outstanding challenge byte by byte.
        guard constantTimeEquals(Data(clientData.challenge.utf8), Data(expectedChallenge.base64URLEncodedString().utf8))
        else {
            throw WebAuthnError(.challengeMismatch, "client data challenge does not match the expected challenge")
        }
        guard relyingParty.origins.contains(clientData.origin) else {
            throw WebAuthnError(
                .originMismatch,
                "origin \(WebAuthnError.quote(clientData.origin)) is not an expected origin"
            )
        }
        // A topOrigin only appears in cross-origin iframes, so it is treated as cross-origin use.
        if clientData.crossOrigin == true || clientData.topOrigin != nil {
            guard relyingParty.allowCrossOrigin else {
                throw WebAuthnError(
                    .crossOriginNotAllowed,
                    "ceremony ran in a cross-origin iframe, which this relying party does not allow"
                )
            }
            if let topOrigin = clientData.topOrigin, let allowed = relyingParty.topOrigins, !allowed.contains(topOrigin)
            {
                throw WebAuthnError(
                    .crossOriginNotAllowed,
                    "top origin \(WebAuthnError.quote(topOrigin)) is not allowed to embed this relying party"
                )
            }
        }
    }

    /// §7.1 steps 15–17 / §7.2 steps 15–17.
    static func checkAuthenticatorData(
        _ data: AuthenticatorData,
        relyingParty: RelyingParty,
        requireUserVerification: Bool
    ) throws {
        let expectedHash = Data(SHA256.hash(data: Data(relyingParty.id.utf8)))
        guard constantTimeEquals(data.rpIDHash, expectedHash) else {
            throw WebAuthnError(
                .rpIDMismatch,
                "rpIdHash is not SHA-256 of the RP ID \(WebAuthnError.quote(relyingParty.id))"
            )
        }
        guard data.flags.contains(.userPresent) else {
            throw WebAuthnError(.userNotPresent, "user presence (UP) flag is not set")
        }
        if requireUserVerification && !data.flags.contains(.userVerified) {
            throw WebAuthnError(.userNotVerified, "user verification is required but the UV flag is not set")
        }
    }

    /// Equality whose running time does not depend on where the inputs differ. Hashing first
    /// makes lengths irrelevant as well.
    public static func constantTimeEquals(_ a: Data, _ b: Data) -> Bool {
        let digestA = Array(SHA256.hash(data: a))
        let digestB = Array(SHA256.hash(data: b))
        var difference: UInt8 = 0
        for index in 0..<digestA.count {
            difference |= digestA[index] ^ digestB[index]
        }
        return difference == 0
    }
}
