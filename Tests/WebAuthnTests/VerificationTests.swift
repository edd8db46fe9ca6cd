import Crypto
import Foundation
import WebAuthn
import XCTest
import _CryptoExtras

final class VerificationTests: XCTestCase {
    let authenticator = SoftwareAuthenticator()
    let challenge = makeChallenge()
    let rp = RelyingParty(id: "example.com", origins: ["https://example.com", "https://login.example.com"])

    // MARK: - Registration

    func verifyRegistration(
        _ response: (clientDataJSON: Data, attestationObject: Data),
        challenge: Data? = nil,
        rp: RelyingParty? = nil,
        requireUserVerification: Bool = true
    ) throws -> VerifiedRegistration {
        try WebAuthnVerifier.verifyRegistration(
            clientDataJSON: response.clientDataJSON,
            attestationObject: response.attestationObject,
            expectedChallenge: challenge ?? self.challenge,
            relyingParty: rp ?? self.rp,
            requireUserVerification: requireUserVerification
        )
    }

    func testNoneRegistrationVerifies() throws {
        let result = try verifyRegistration(authenticator.register(challenge: challenge, signCount: 5))
        XCTAssertEqual(result.credentialID, authenticator.credentialID)
        XCTAssertEqual(result.publicKey, authenticator.publicKey)
        XCTAssertEqual(result.publicKeyCBOR, authenticator.publicKey.cbor)
        XCTAssertEqual(try COSEKey(cbor: result.publicKeyCBOR), authenticator.publicKey)
        XCTAssertEqual(result.signCount, 5)
        XCTAssertEqual(result.aaguid, authenticator.aaguid)
        XCTAssertTrue(result.userVerified)
        XCTAssertTrue(result.backupEligible)
        XCTAssertTrue(result.backedUp)
        XCTAssertEqual(result.attestationFormat, "none")
    }

    func testPackedSelfAttestedRegistrationVerifies() throws {
        let result = try verifyRegistration(
            authenticator.register(challenge: challenge, flags: [.userPresent, .userVerified], format: .packed)
        )
        XCTAssertEqual(result.attestationFormat, "packed")
        XCTAssertFalse(result.backupEligible)
        XCTAssertFalse(result.backedUp)
    }

    func testRegistrationFromSecondOrigin() throws {
        XCTAssertNoThrow(
            try verifyRegistration(authenticator.register(challenge: challenge, origin: "https://login.example.com"))
        )
    }

    func testRegistrationRejectsWrongType() {
        XCTAssertThrowsWebAuthn(
            .wrongType,
            try verifyRegistration(authenticator.register(challenge: challenge, type: "webauthn.get"))
        )
    }

    func testRegistrationRejectsWrongChallenge() {
        XCTAssertThrowsWebAuthn(
            .challengeMismatch,
            try verifyRegistration(authenticator.register(challenge: makeChallenge()))
        )
        var nearMiss = challenge
        nearMiss[31] ^= 1
        XCTAssertThrowsWebAuthn(.challengeMismatch, try verifyRegistration(authenticator.register(challenge: nearMiss)))
        XCTAssertThrowsWebAuthn(
            .challengeMismatch,
            try verifyRegistration(authenticator.register(challenge: challenge.prefix(31)))
        )
    }

    func testRegistrationRejectsShortExpectedChallenge() {
        // A server that lost its session state and passes an empty challenge must not accept anything.
        XCTAssertThrowsWebAuthn(
            .challengeMismatch,
            try verifyRegistration(authenticator.register(challenge: Data()), challenge: Data())
        )
        XCTAssertThrowsWebAuthn(
            .challengeMismatch,
            try verifyRegistration(authenticator.register(challenge: Data(count: 15)), challenge: Data(count: 15))
        )
    }

    func testRegistrationRejectsWrongOrigin() {
        for origin in [
            "https://evil.example", "https://example.com/", "http://example.com", "https://example.com:443",
            "HTTPS://EXAMPLE.COM",
        ] {
            XCTAssertThrowsWebAuthn(
                .originMismatch,
                try verifyRegistration(authenticator.register(challenge: challenge, origin: origin)),
                origin
            )
        }
    }

    func testRegistrationCrossOriginRules() throws {
        let crossOrigin = authenticator.register(challenge: challenge, crossOrigin: true)
        XCTAssertThrowsWebAuthn(.crossOriginNotAllowed, try verifyRegistration(crossOrigin))
        let topOriginOnly = authenticator.register(
            challenge: challenge,
            crossOrigin: nil,
            topOrigin: "https://shop.example"
        )
        XCTAssertThrowsWebAuthn(.crossOriginNotAllowed, try verifyRegistration(topOriginOnly))

        var permissive = rp
        permissive.allowCrossOrigin = true
        XCTAssertNoThrow(try verifyRegistration(crossOrigin, rp: permissive))
        let embedded = authenticator.register(
            challenge: challenge,
            crossOrigin: true,
            topOrigin: "https://shop.example"
        )
        XCTAssertNoThrow(try verifyRegistration(embedded, rp: permissive))

        var listed = permissive
        listed.topOrigins = ["https://partner.example"]
        XCTAssertThrowsWebAuthn(.crossOriginNotAllowed, try verifyRegistration(embedded, rp: listed))
        listed.topOrigins = ["https://shop.example"]
        XCTAssertNoThrow(try verifyRegistration(embedded, rp: listed))
    }

    func testRegistrationRejectsWrongRPID() {
        XCTAssertThrowsWebAuthn(
            .rpIDMismatch,
            try verifyRegistration(authenticator.register(challenge: challenge, rpID: "evil.example"))
        )
        XCTAssertThrowsWebAuthn(
            .rpIDMismatch,
            try verifyRegistration(authenticator.register(challenge: challenge, rpID: "login.example.com"))
        )
    }

    func testRegistrationRequiresUserPresence() {
        XCTAssertThrowsWebAuthn(
            .userNotPresent,
            try verifyRegistration(authenticator.register(challenge: challenge, flags: [.userVerified]))
        )
    }

    func testRegistrationUserVerificationOnlyWhenRequired() throws {
        let unverified = authenticator.register(challenge: challenge, flags: [.userPresent])
        XCTAssertThrowsWebAuthn(.userNotVerified, try verifyRegistration(unverified, requireUserVerification: true))
        let result = try verifyRegistration(unverified, requireUserVerification: false)
        XCTAssertFalse(result.userVerified)
    }

    func testRegistrationRejectsBackedUpWithoutBackupEligible() {
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try verifyRegistration(
                authenticator.register(challenge: challenge, flags: [.userPresent, .userVerified, .backedUp])
            )
        )
    }

    func testRegistrationRejectsBadPackedSignature() {
        XCTAssertThrowsWebAuthn(
            .attestationSignatureInvalid,
            try verifyRegistration(
                authenticator.register(challenge: challenge, format: .packed, attestationKey: P256.Signing.PrivateKey())
            )
        )
    }

    func testRegistrationRejectsTamperedClientData() throws {
        // Packed signs the client data hash: swapping in other (individually valid) client data breaks it.
        let original = authenticator.register(challenge: challenge, format: .packed)
        let other = authenticator.register(challenge: challenge, origin: "https://login.example.com", format: .none)
        XCTAssertThrowsWebAuthn(
            .attestationSignatureInvalid,
            try verifyRegistration((other.clientDataJSON, original.attestationObject))
        )
    }

    func testRegistrationRejectsMalformedInputs() {
        let valid = authenticator.register(challenge: challenge)
        XCTAssertThrowsWebAuthn(.malformedClientData, try verifyRegistration((Data("{".utf8), valid.attestationObject)))
        XCTAssertThrowsWebAuthn(.tooLarge, try verifyRegistration((Data(count: 5000), valid.attestationObject)))
        XCTAssertThrowsWebAuthn(
            .malformedCBOR,
            try verifyRegistration((valid.clientDataJSON, valid.attestationObject.dropLast()))
        )
        XCTAssertThrowsWebAuthn(.tooLarge, try verifyRegistration((valid.clientDataJSON, Data(count: 20_000))))
    }

    func testRegistrationRejectsAMalformedRSACredentialKey() {
        // Authenticator data claiming an RS256 credential key with a zero modulus, behind "none" attestation.
        let rsaKey = CBOR.map([
            (key: .int(1), value: .int(3)), (key: .int(3), value: .int(-257)),
            (key: .int(-1), value: .bytes(Data(count: 256))), (key: .int(-2), value: .bytes(Data([1, 0, 1]))),
        ]).encoded()
        let authData = AuthenticatorData(rpID: "example.com", flags: [.userPresent, .userVerified], signCount: 0).raw
        var withKey = authData
        withKey[32] |= 0x40
        withKey += Data(count: 16) + Data([0, 4, 1, 2, 3, 4]) + rsaKey
        let attestationObject = CBOR.map([
            (key: .text("fmt"), value: .text("none")), (key: .text("attStmt"), value: .map([])),
            (key: .text("authData"), value: .bytes(withKey)),
        ]).encoded()
        let clientDataJSON = authenticator.register(challenge: challenge).clientDataJSON
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try verifyRegistration((clientDataJSON, attestationObject)))
    }

    /// A credential of each algorithm browsers offer by default: registered with packed self
    /// attestation (signed in the key's own algorithm), stored as COSE bytes, then asserted.
    /// Before, EdDSA and RS256 keys were refused as unsupported.
    func testEdDSAAndRS256CredentialsRegisterAndAssert() throws {
        let ed25519 = Curve25519.Signing.PrivateKey()
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let cases: [(String, COSEKey, (Data) throws -> Data)] = [
            ("EdDSA", COSEKey(ed25519.publicKey), { try ed25519.signature(for: $0) }),
            (
                "RS256", try COSEKey(rsa.publicKey),
                { try rsa.signature(for: $0, padding: .insecurePKCS1v1_5).rawRepresentation }
            ),
        ]
        for (name, key, sign) in cases {
            let clientDataJSON = CollectedClientData(
                type: "webauthn.create",
                challenge: challenge.base64URLEncodedString(),
                origin: "https://example.com",
                crossOrigin: false,
                topOrigin: nil
            ).jsonData()
            let authenticatorData = AuthenticatorData(
                rpID: "example.com",
                flags: [.userPresent, .userVerified],
                signCount: 0,
                attestedCredential: .init(aaguid: Data(count: 16), credentialID: Data(name.utf8), publicKey: key)
            )
            let attestation = try AttestationObject.makeAttestationObject(
                authenticatorData: authenticatorData,
                format: .packed,
                clientDataHash: Data(SHA256.hash(data: clientDataJSON)),
                sign: sign
            )
            let registration = try verifyRegistration((clientDataJSON, attestation))
            XCTAssertEqual(registration.publicKey.algorithm, key.algorithm, name)
            XCTAssertThrowsWebAuthn(
                .unsupportedAlgorithm,
                try WebAuthnVerifier.verifyRegistration(
                    clientDataJSON: clientDataJSON,
                    attestationObject: attestation,
                    expectedChallenge: challenge,
                    relyingParty: rp,
                    requireUserVerification: true,
                    allowedAlgorithms: [.es256]
                ),
                "\(name) was not offered"
            )

            let stored = try COSEKey(cbor: registration.publicKeyCBOR)
            let next = makeChallenge()
            let getData = CollectedClientData(
                type: "webauthn.get",
                challenge: next.base64URLEncodedString(),
                origin: "https://example.com",
                crossOrigin: false,
                topOrigin: nil
            ).jsonData()
            let assertionData = AuthenticatorData(
                rpID: "example.com",
                flags: [.userPresent, .userVerified],
                signCount: 1
            ).raw
            let signature = try sign(assertionData + Data(SHA256.hash(data: getData)))
            func assert(_ signature: Data) throws -> VerifiedAssertion {
                try WebAuthnVerifier.verifyAssertion(
                    credentialID: Data(name.utf8),
                    clientDataJSON: getData,
                    authenticatorData: assertionData,
                    signature: signature,
                    userHandle: nil,
                    expectedChallenge: next,
                    relyingParty: rp,
                    credentialPublicKey: stored,
                    storedSignCount: 0,
                    requireUserVerification: true,
                    allowCredentials: nil,
                    expectedUserHandle: nil
                )
            }
            XCTAssertEqual(try assert(signature).signCount, 1, name)
            var flipped = signature
            flipped[flipped.count / 2] ^= 1
            XCTAssertThrowsWebAuthn(.signatureInvalid, try assert(flipped), name)
        }
    }

    /// A real "none" registration from py_webauthn's test suite (ES256, localhost).
    func testKnownNoneRegistrationVerifies() throws {
        let result = try WebAuthnVerifier.verifyRegistration(
            clientDataJSON: Data(
                b64u:
                    "eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoiVHdON240V1R5R0tMYzRaWS1xR3NGcUtuSE00bmdscXN5VjBJQ0psTjJUTzlYaVJ5RnRya2FEd1V2c3FsLWdrTEpYUDZmbkYxTWxyWjUzTW00UjdDdnciLCJvcmlnaW4iOiJodHRwOi8vbG9jYWxob3N0OjUwMDAiLCJjcm9zc09yaWdpbiI6ZmFsc2V9"
            ),
            attestationObject: Data(
                b64u:
                    "o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YVjESZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2NFAAAAFwAAAAAAAAAAAAAAAAAAAAAAQPctcQPE5oNRRJk_nO_371mf7qE7qIodzr0eOf6ACvnMB1oQG165dqutoi1U44shGezu5_gkTjmOPeJO0N8a7P-lAQIDJiABIVggSFbUJF-42Ug3pdM8rDRFu_N5oiVEysPDB6n66r_7dZAiWCDUVnB39FlGypL-qAoIO9xWHtJygo2jfDmHl-_eKFRLDA"
            ),
            expectedChallenge: Data(
                b64u: "TwN7n4WTyGKLc4ZY-qGsFqKnHM4nglqsyV0ICJlN2TO9XiRyFtrkaDwUvsql-gkLJXP6fnF1MlrZ53Mm4R7Cvw"
            ),
            relyingParty: RelyingParty(id: "localhost", origins: ["https://foo.bar", "http://localhost:5000"]),
            requireUserVerification: true
        )
        XCTAssertEqual(result.attestationFormat, "none")
        XCTAssertEqual(result.aaguid, Data(count: 16))
        XCTAssertEqual(
            result.credentialID,
            Data(b64u: "9y1xA8Tmg1FEmT-c7_fvWZ_uoTuoih3OvR45_oAK-cwHWhAbXrl2q62iLVTjiyEZ7O7n-CROOY494k7Q3xrs_w")
        )
        XCTAssertEqual(
            result.publicKeyCBOR,
            Data(
                b64u:
                    "pQECAyYgASFYIEhW1CRfuNlIN6XTPKw0RbvzeaIlRMrDwwep-uq_-3WQIlgg1FZwd_RZRsqS_qgKCDvcVh7ScoKNo3w5h5fv3ihUSww"
            )
        )
        XCTAssertEqual(result.signCount, 23)
        XCTAssertTrue(result.userVerified)
    }

    // MARK: - Assertion

    func verifyAssertion(
        _ response: (clientDataJSON: Data, authenticatorData: Data, signature: Data),
        storedSignCount: UInt32 = 0,
        requireUserVerification: Bool = true,
        key: COSEKey? = nil,
        challenge: Data? = nil,
        allowCredentials: [Data]? = nil,
        userHandle: Data? = nil,
        expectedUserHandle: Data? = nil
    ) throws -> VerifiedAssertion {
        try WebAuthnVerifier.verifyAssertion(
            credentialID: authenticator.credentialID,
            clientDataJSON: response.clientDataJSON,
            authenticatorData: response.authenticatorData,
            signature: response.signature,
            userHandle: userHandle,
            expectedChallenge: challenge ?? self.challenge,
            relyingParty: rp,
            credentialPublicKey: key ?? authenticator.publicKey,
            storedSignCount: storedSignCount,
            requireUserVerification: requireUserVerification,
            allowCredentials: allowCredentials,
            expectedUserHandle: expectedUserHandle
        )
    }

    func testAssertionVerifies() throws {
        let result = try verifyAssertion(
            authenticator.assert(
                challenge: challenge,
                flags: [.userPresent, .userVerified, .backupEligible],
                signCount: 8
            ),
            storedSignCount: 7
        )
        XCTAssertEqual(result.signCount, 8)
        XCTAssertTrue(result.userVerified)
        XCTAssertTrue(result.backupEligible)
        XCTAssertFalse(result.backedUp)
    }

    func testAssertionAfterRegistrationUsesStoredKeyBytes() throws {
        let registration = try verifyRegistration(authenticator.register(challenge: challenge))
        let stored = try COSEKey(cbor: registration.publicKeyCBOR)
        let next = makeChallenge()
        XCTAssertNoThrow(
            try verifyAssertion(
                authenticator.assert(challenge: next),
                storedSignCount: registration.signCount,
                key: stored,
                challenge: next
            )
        )
    }

    func testAssertionRejectsWrongType() {
        XCTAssertThrowsWebAuthn(
            .wrongType,
            try verifyAssertion(authenticator.assert(challenge: challenge, type: "webauthn.create"))
        )
        XCTAssertThrowsWebAuthn(
            .wrongType,
            try verifyAssertion(authenticator.assert(challenge: challenge, type: "payment.get"))
        )
    }

    func testAssertionRejectsWrongChallenge() {
        XCTAssertThrowsWebAuthn(
            .challengeMismatch,
            try verifyAssertion(authenticator.assert(challenge: makeChallenge()))
        )
    }

    func testAssertionRejectsWrongOrigin() {
        XCTAssertThrowsWebAuthn(
            .originMismatch,
            try verifyAssertion(authenticator.assert(challenge: challenge, origin: "https://evil.example"))
        )
    }

    func testAssertionRejectsCrossOrigin() {
        XCTAssertThrowsWebAuthn(
            .crossOriginNotAllowed,
            try verifyAssertion(authenticator.assert(challenge: challenge, crossOrigin: true))
        )
    }

    func testAssertionRejectsWrongRPID() {
        XCTAssertThrowsWebAuthn(
            .rpIDMismatch,
            try verifyAssertion(authenticator.assert(challenge: challenge, rpID: "evil.example"))
        )
    }

    func testAssertionRequiresUserPresence() {
        XCTAssertThrowsWebAuthn(
            .userNotPresent,
            try verifyAssertion(authenticator.assert(challenge: challenge, flags: [.userVerified]))
        )
    }

    func testAssertionUserVerificationOnlyWhenRequired() throws {
        let unverified = authenticator.assert(challenge: challenge, flags: [.userPresent])
        XCTAssertThrowsWebAuthn(.userNotVerified, try verifyAssertion(unverified, requireUserVerification: true))
        XCTAssertFalse(try verifyAssertion(unverified, requireUserVerification: false).userVerified)
    }

    func testAssertionRejectsFlippedSignatureBytes() {
        let valid = authenticator.assert(challenge: challenge)
        for index in [0, 5, valid.signature.count / 2, valid.signature.count - 1] {
            var signature = valid.signature
            signature[index] ^= 0x01
            XCTAssertThrowsWebAuthn(
                .signatureInvalid,
                try verifyAssertion((valid.clientDataJSON, valid.authenticatorData, signature)),
                "byte \(index)"
            )
        }
    }

    func testAssertionRejectsSignatureByAnotherKey() {
        XCTAssertThrowsWebAuthn(
            .signatureInvalid,
            try verifyAssertion(authenticator.assert(challenge: challenge, signingKey: P256.Signing.PrivateKey()))
        )
        XCTAssertThrowsWebAuthn(
            .signatureInvalid,
            try verifyAssertion(
                authenticator.assert(challenge: challenge),
                key: COSEKey(P256.Signing.PrivateKey().publicKey)
            )
        )
    }

    func testAssertionRejectsRawSignatureEncoding() throws {
        let valid = authenticator.assert(challenge: challenge)
        let raw = try P256.Signing.ECDSASignature(derRepresentation: valid.signature).rawRepresentation
        XCTAssertThrowsWebAuthn(
            .signatureInvalid,
            try verifyAssertion((valid.clientDataJSON, valid.authenticatorData, raw))
        )
        XCTAssertThrowsWebAuthn(
            .signatureInvalid,
            try verifyAssertion((valid.clientDataJSON, valid.authenticatorData, Data()))
        )
        XCTAssertThrowsWebAuthn(
            .signatureInvalid,
            try verifyAssertion((valid.clientDataJSON, valid.authenticatorData, valid.signature + Data([0]))),
            "DER with trailing bytes"
        )
    }

    func testAssertionRejectsTamperedSignedData() {
        let valid = authenticator.assert(challenge: challenge, flags: [.userPresent, .userVerified])
        // Setting a flag (BE) after signing, or swapping in other valid client data, breaks the signature.
        var upgraded = valid.authenticatorData
        upgraded[32] |= 0x08
        XCTAssertThrowsWebAuthn(
            .signatureInvalid,
            try verifyAssertion((valid.clientDataJSON, upgraded, valid.signature))
        )
        let otherClientData = authenticator.assert(challenge: challenge, origin: "https://login.example.com")
            .clientDataJSON
        XCTAssertThrowsWebAuthn(
            .signatureInvalid,
            try verifyAssertion((otherClientData, valid.authenticatorData, valid.signature))
        )
    }

    func testSignCounterRule() throws {
        XCTAssertThrowsWebAuthn(
            .counterRegression,
            try verifyAssertion(authenticator.assert(challenge: challenge, signCount: 7), storedSignCount: 7),
            "equal"
        )
        XCTAssertThrowsWebAuthn(
            .counterRegression,
            try verifyAssertion(authenticator.assert(challenge: challenge, signCount: 6), storedSignCount: 7),
            "lower"
        )
        XCTAssertThrowsWebAuthn(
            .counterRegression,
            try verifyAssertion(authenticator.assert(challenge: challenge, signCount: 0), storedSignCount: 7),
            "counter reset to zero"
        )
        XCTAssertEqual(
            try verifyAssertion(authenticator.assert(challenge: challenge, signCount: 0), storedSignCount: 0).signCount,
            0,
            "authenticators without a counter always send 0"
        )
        XCTAssertEqual(
            try verifyAssertion(authenticator.assert(challenge: challenge, signCount: 1), storedSignCount: 0).signCount,
            1
        )
        XCTAssertEqual(
            try verifyAssertion(authenticator.assert(challenge: challenge, signCount: .max), storedSignCount: .max - 1)
                .signCount,
            .max
        )
    }

    func testAssertionRejectsMalformedAuthenticatorData() {
        let valid = authenticator.assert(challenge: challenge)
        let trailing = valid.authenticatorData + Data([0])
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try verifyAssertion(
                (
                    valid.clientDataJSON, trailing,
                    authenticator.sign(authenticatorData: trailing, clientDataJSON: valid.clientDataJSON)
                )
            ),
            "trailing bytes, even when signed"
        )
        var atFlag = valid.authenticatorData
        atFlag[32] |= 0x40
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try verifyAssertion(
                (
                    valid.clientDataJSON, atFlag,
                    authenticator.sign(authenticatorData: atFlag, clientDataJSON: valid.clientDataJSON)
                )
            ),
            "AT flag without data"
        )
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try verifyAssertion((valid.clientDataJSON, valid.authenticatorData.prefix(36), valid.signature)),
            "truncated"
        )
    }

    func testAssertionRejectsAttestedCredentialData() {
        let registration = AuthenticatorData(
            rpID: "example.com",
            flags: [.userPresent, .userVerified],
            signCount: 1,
            attestedCredential: .init(
                credentialID: authenticator.credentialID,
                publicKey: authenticator.publicKey
            )
        ).raw
        let clientDataJSON = authenticator.assert(challenge: challenge).clientDataJSON
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try verifyAssertion(
                (
                    clientDataJSON, registration,
                    authenticator.sign(authenticatorData: registration, clientDataJSON: clientDataJSON)
                )
            )
        )
    }

    func testAssertionRejectsMalformedClientData() {
        let valid = authenticator.assert(challenge: challenge)
        XCTAssertThrowsWebAuthn(
            .malformedClientData,
            try verifyAssertion((Data("[]".utf8), valid.authenticatorData, valid.signature))
        )
        XCTAssertThrowsWebAuthn(
            .tooLarge,
            try verifyAssertion((Data(repeating: 0x20, count: 4097), valid.authenticatorData, valid.signature))
        )
    }

    func testAssertionCredentialAndUserChecks() throws {
        let valid = authenticator.assert(challenge: challenge)
        XCTAssertNoThrow(try verifyAssertion(valid, allowCredentials: [Data([1]), authenticator.credentialID]))
        XCTAssertNoThrow(try verifyAssertion(valid, allowCredentials: []), "an empty list means any credential")
        XCTAssertThrowsWebAuthn(.credentialIDMismatch, try verifyAssertion(valid, allowCredentials: [Data([1])]))

        let owner = Data("user-1".utf8)
        XCTAssertNoThrow(try verifyAssertion(valid, userHandle: owner, expectedUserHandle: owner))
        XCTAssertNoThrow(try verifyAssertion(valid, userHandle: nil, expectedUserHandle: owner))
        XCTAssertThrowsWebAuthn(
            .credentialIDMismatch,
            try verifyAssertion(valid, userHandle: Data("user-2".utf8), expectedUserHandle: owner)
        )

        XCTAssertThrowsWebAuthn(
            .credentialIDMismatch,
            try WebAuthnVerifier.verifyAssertion(
                credentialID: Data(),
                clientDataJSON: valid.clientDataJSON,
                authenticatorData: valid.authenticatorData,
                signature: valid.signature,
                userHandle: nil,
                expectedChallenge: challenge,
                relyingParty: rp,
                credentialPublicKey: authenticator.publicKey,
                storedSignCount: 0,
                requireUserVerification: false
            )
        )
    }

    // MARK: - Fixed vectors

    /// Made once with Python `cryptography` (OpenSSL) from the fixed private key below, so it
    /// also cross-checks swift-crypto against an independent implementation.
    func testFixedVectorFromIndependentImplementation() throws {
        let privateKey = try P256.Signing.PrivateKey(
            rawRepresentation: Data(hex: "e36c17ee5838513f6c2ec7b6d77c03be030471d14f6170b0d02d843e9486effd")
        )
        XCTAssertEqual(
            privateKey.publicKey.rawRepresentation,
            Data(
                hex: """
                    3ac886c16f649cee9bfdb6bfe11841d18aa4618a815bf7bf50236a82d538862a
                    911ddb75e327ed8c3bbd90557757c531b6e2f92d44dcd90290ac4a7069483922
                    """
            )
        )
        let clientDataJSON = Data(
            #"{"type":"webauthn.get","challenge":"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA","origin":"https://example.com","crossOrigin":false}"#
                .utf8
        )
        let challenge = Data(1...32)
        XCTAssertEqual(
            CollectedClientData(
                type: "webauthn.get",
                challenge: challenge.base64URLEncodedString(),
                origin: "https://example.com",
                crossOrigin: false
            ).jsonData(),
            clientDataJSON,
            "our serialisation matches the browser layout byte for byte"
        )
        let authenticatorData = Data(hex: "a379a6f6eeafb9a55e378c118034e2751e682fab9f2d30ab13d2125586ce1947050000002a")
        let signature = Data(
            hex: """
                3045022000ce624924a2fb689dc8f2345d6a54071984301bf1616faa89a9e333ea68bb37
                022100af3c403b820e31741b74554f482e031257749bc3c50aa2c3dc2094249d225448
                """
        )
        let result = try WebAuthnVerifier.verifyAssertion(
            credentialID: Data([0x01]),
            clientDataJSON: clientDataJSON,
            authenticatorData: authenticatorData,
            signature: signature,
            userHandle: nil,
            expectedChallenge: challenge,
            relyingParty: RelyingParty(id: "example.com", origins: ["https://example.com"]),
            credentialPublicKey: COSEKey(privateKey.publicKey),
            storedSignCount: 41,
            requireUserVerification: true
        )
        XCTAssertEqual(result.signCount, 42)
        XCTAssertTrue(result.userVerified)

        // And a fresh assertion by the same fixed key through the software authenticator.
        var fixed = SoftwareAuthenticator()
        fixed.privateKey = privateKey
        XCTAssertNoThrow(
            try verifyAssertion(
                fixed.assert(challenge: self.challenge, signCount: 3),
                storedSignCount: 2,
                key: COSEKey(privateKey.publicKey)
            )
        )
    }

    /// Real ES256 assertions from py_webauthn's test suite (localhost:5000).
    func testKnownAssertionsVerify() throws {
        let localhost = RelyingParty(id: "localhost", origins: ["https://foo.bar", "http://localhost:5000"])
        let first = try WebAuthnVerifier.verifyAssertion(
            credentialID: Data(
                b64u: "EDx9FfAbp4obx6oll2oC4-CZuDidRVV4gZhxC529ytlnqHyqCStDUwfNdm1SNHAe3X5KvueWQdAX3x9R1a2b9Q"
            ),
            clientDataJSON: Data(
                b64u:
                    "eyJjaGFsbGVuZ2UiOiJ4aTMwR1BHQUZZUnhWRHBZMXNNMTBEYUx6VlFHNjZudi1fN1JVYXpIMHZJMll2RzhMWWdERW52TjVmWlpOVnV2RUR1TWk5dGUzVkxxYjQyTjBma0xHQSIsImNsaWVudEV4dGVuc2lvbnMiOnt9LCJoYXNoQWxnb3JpdGhtIjoiU0hBLTI1NiIsIm9yaWdpbiI6Imh0dHA6Ly9sb2NhbGhvc3Q6NTAwMCIsInR5cGUiOiJ3ZWJhdXRobi5nZXQifQ"
            ),
            authenticatorData: Data(b64u: "SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MBAAAATg"),
            signature: Data(
                b64u: "MEUCIGisVZOBapCWbnJJvjelIzwpixxIwkjCCb5aCHafQu68AiEA88v-2pJNNApPFwAKFiNuf82-2hBxYW5kGwVweeoxCwo"
            ),
            userHandle: nil,
            expectedChallenge: Data(
                b64u: "xi30GPGAFYRxVDpY1sM10DaLzVQG66nv-_7RUazH0vI2YvG8LYgDEnvN5fZZNVuvEDuMi9te3VLqb42N0fkLGA"
            ),
            relyingParty: localhost,
            credentialPublicKey: COSEKey(
                cbor: Data(
                    b64u:
                        "pQECAyYgASFYIIeDTe-gN8A-zQclHoRnGFWN8ehM1b7yAsa8I8KIvmplIlgg4nFGT5px8o6gpPZZhO01wdy9crDSA_Ngtkx0vGpvPHI"
                )
            ),
            storedSignCount: 77,
            requireUserVerification: false
        )
        XCTAssertEqual(first.signCount, 78)
        XCTAssertFalse(first.userVerified)

        let second = try WebAuthnVerifier.verifyAssertion(
            credentialID: Data(
                b64u:
                    "AXmOjWWZH67pgl5_gAbKVBqoL2dyHHGEWZLspIsCwULG0hZ3HyuGgvkaRcSOLq9W72XtegcvFYXIdlafrilbtVnx2Q14gNbfSQQP2sgNEAif4MjHtGpeVB0BfFawCs85Y3XY_j4sxthVnyTY_Q"
            ),
            clientDataJSON: Data(
                b64u:
                    "eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoiNnpyU1JYOEN4d1BTWEVBclh5WEwydHBiNnJCN1N0YXIwckxWSWo1cnZmNzRtWktGNWlyNzE1WG1nejV0QV9HeUhleE40b1hmclE4ODlBclZDTGFSZEEiLCJvcmlnaW4iOiJodHRwOi8vbG9jYWxob3N0OjUwMDAiLCJjcm9zc09yaWdpbiI6ZmFsc2V9"
            ),
            authenticatorData: Data(b64u: "SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFYN-Mog"),
            signature: Data(
                b64u: "MEUCIQDBqeI274exaKWGQz37g7yo1--TVcZSCcYVftZ1AnEJkQIgNw-nlx-_U9rVfFfER8oX6BlYZTuPFyGaL_wCDY23s0E"
            ),
            userHandle: Data(b64u: "TldNMFlqYzNOVFF0WW1NNE5DMDBaakprTFRrME9EVXROR05rTnpreVkyTTROVEUz"),
            expectedChallenge: Data(
                b64u: "6zrSRX8CxwPSXEArXyXL2tpb6rB7Star0rLVIj5rvf74mZKF5ir715Xmgz5tA_GyHexN4oXfrQ889ArVCLaRdA"
            ),
            relyingParty: localhost,
            credentialPublicKey: COSEKey(
                cbor: Data(
                    b64u:
                        "pQECAyYgASFYIFm1Py-FzzFOuwXbRbTr95SiDxuB1BkZsEEJxFhquzqkIlggL1U1T713Jo_2muzhXvpbwRNdoAs8CYK6PflvY1MBdCI"
                )
            ),
            storedSignCount: 1_625_263_263,
            requireUserVerification: true
        )
        XCTAssertEqual(second.signCount, 1_625_263_266)
        XCTAssertTrue(second.userVerified)
    }

    /// py_webauthn's "UV required but not set" assertion: a valid signature, UV flag clear.
    func testKnownAssertionWithoutUserVerification() throws {
        let clientDataJSON = Data(
            b64u:
                "eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoidW1HZW1YSklQQlhQeGtEOEhqYW51djlCRG9yOFo3TzNhUGR0T2dNQ2RXNFBBZnFEWDQzRUZsaHJzRjBQVzkwZGY1enJnYnQ3WVZNUkFhMjd0Q2RIenciLCJvcmlnaW4iOiJodHRwOi8vbG9jYWxob3N0OjUwMDAiLCJjcm9zc09yaWdpbiI6ZmFsc2V9"
        )
        let authenticatorData = Data(b64u: "SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MBAAAAIQ")
        let signature = Data(
            b64u: "MEUCIGp5ADnU_SFvT4J_bKvQJ4Pc1GmANhbYq5GioOLjyUrxAiEA6Kk5qAZb8MLY-jyTiJLr_R9Fke02UHkxsRB0dnZt2X8"
        )
        let key = try COSEKey(
            cbor: Data(
                b64u:
                    "pQECAyYgASFYIOQ5TKpXJR2cV76Wgfge9BkLkEhLxVjhFjM1jKHYOcqpIlggaiNy1blt3OU8Hsmg041HUYP7eajgL7fk3nSuTEjYCwU"
            )
        )
        let challenge = Data(
            b64u: "umGemXJIPBXPxkD8Hjanuv9BDor8Z7O3aPdtOgMCdW4PAfqDX43EFlhrsF0PW90df5zrgbt7YVMRAa27tCdHzw"
        )
        func verify(requireUV: Bool) throws -> VerifiedAssertion {
            try WebAuthnVerifier.verifyAssertion(
                credentialID: Data(
                    b64u: "4-5MZF69j3n2B6Z99dUN0fNrAQmrjELJIebWVw8aKfw1EQKg28Tx40R_kw-1pcrfSgJFKm3mCtAtBgSRWgDMng"
                ),
                clientDataJSON: clientDataJSON,
                authenticatorData: authenticatorData,
                signature: signature,
                userHandle: nil,
                expectedChallenge: challenge,
                relyingParty: RelyingParty(id: "localhost", origins: ["http://localhost:5000"]),
                credentialPublicKey: key,
                storedSignCount: 32,
                requireUserVerification: requireUV
            )
        }
        XCTAssertThrowsWebAuthn(.userNotVerified, try verify(requireUV: true))
        XCTAssertEqual(try verify(requireUV: false).signCount, 33)
    }
}
