import Crypto
import Foundation
import WebAuthn
import XCTest

final class AuthenticatorDataTests: XCTestCase {
    let key = COSEKey(P256.Signing.PrivateKey().publicKey)
    let rpIDHash = Data(SHA256.hash(data: Data("example.com".utf8)))

    /// rpIdHash ‖ flags ‖ signCount for hand-built inputs.
    func header(flags: UInt8, signCount: UInt32 = 7) -> Data {
        rpIDHash + Data([flags])
            + Data([
                UInt8(signCount >> 24), UInt8(signCount >> 16 & 0xFF), UInt8(signCount >> 8 & 0xFF),
                UInt8(signCount & 0xFF),
            ])
    }

    func attestedData(idLength: Int = 16, key: Data? = nil) -> Data {
        Data(repeating: 0xAA, count: 16) + Data([UInt8(idLength >> 8), UInt8(idLength & 0xFF)])
            + Data(repeating: 0x42, count: idLength) + (key ?? self.key.cbor)
    }

    // MARK: Building and parsing

    func testMinimalDataParses() throws {
        let parsed = try AuthenticatorData(header(flags: 0x05, signCount: 0x0102_0304))
        XCTAssertEqual(parsed.rpIDHash, rpIDHash)
        XCTAssertEqual(parsed.flags, [.userPresent, .userVerified])
        XCTAssertEqual(parsed.signCount, 0x0102_0304)
        XCTAssertNil(parsed.attestedCredential)
        XCTAssertNil(parsed.extensions)
        XCTAssertEqual(parsed.raw.count, 37)
    }

    func testRoundTripsWithAttestedCredentialAndExtensions() throws {
        let credential = AuthenticatorData.AttestedCredential(
            aaguid: Data(repeating: 9, count: 16),
            credentialID: Data(repeating: 3, count: 1023),
            publicKey: key
        )
        let extensions: CBOR = .map([(key: .text("credProtect"), value: .unsigned(2))])
        let built = AuthenticatorData(
            rpID: "example.com",
            flags: [.userPresent, .backupEligible],
            signCount: 99,
            attestedCredential: credential,
            extensions: extensions
        )
        XCTAssertEqual(built.flags, [.userPresent, .backupEligible, .attestedCredentialData, .extensionData])

        let parsed = try AuthenticatorData(built.raw)
        XCTAssertEqual(parsed.raw, built.raw)
        XCTAssertEqual(parsed.rpIDHash, rpIDHash)
        XCTAssertEqual(parsed.flags, built.flags)
        XCTAssertEqual(parsed.signCount, 99)
        XCTAssertEqual(parsed.attestedCredential?.aaguid, credential.aaguid)
        XCTAssertEqual(parsed.attestedCredential?.credentialID, credential.credentialID)
        XCTAssertEqual(parsed.attestedCredential?.publicKey, key)
        XCTAssertEqual(parsed.attestedCredential?.publicKeyCBOR, key.cbor)
        XCTAssertEqual(parsed.extensions, extensions)
    }

    func testBuilderDerivesATAndEDFlags() {
        let built = AuthenticatorData(
            rpID: "example.com",
            flags: [.userPresent, .attestedCredentialData, .extensionData],
            signCount: 0
        )
        XCTAssertEqual(built.flags, [.userPresent])
        XCTAssertEqual(built.raw, header(flags: 0x01, signCount: 0))
    }

    func testParsesFromSlices() throws {
        let whole = Data([0xFF, 0xFF]) + header(flags: 0x01)
        let parsed = try AuthenticatorData(whole.dropFirst(2))
        XCTAssertEqual(parsed.rpIDHash.first, rpIDHash.first)
        XCTAssertEqual(parsed.raw.startIndex, 0)
        XCTAssertEqual(parsed.signCount, 7)
    }

    /// py_webauthn's authenticator data from a real ES256 registration ("none" attestation).
    func testParsesKnownRegistrationAuthenticatorData() throws {
        let attestationObject = try CBOR.decode(
            Data(
                b64u:
                    "o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YVjESZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2NFAAAAFwAAAAAAAAAAAAAAAAAAAAAAQPctcQPE5oNRRJk_nO_371mf7qE7qIodzr0eOf6ACvnMB1oQG165dqutoi1U44shGezu5_gkTjmOPeJO0N8a7P-lAQIDJiABIVggSFbUJF-42Ug3pdM8rDRFu_N5oiVEysPDB6n66r_7dZAiWCDUVnB39FlGypL-qAoIO9xWHtJygo2jfDmHl-_eKFRLDA"
            )
        )
        let parsed = try AuthenticatorData(XCTUnwrap(attestationObject["authData"]?.bytesValue))
        XCTAssertEqual(parsed.rpIDHash, Data(SHA256.hash(data: Data("localhost".utf8))))
        XCTAssertEqual(parsed.flags, [.userPresent, .userVerified, .attestedCredentialData])
        XCTAssertEqual(parsed.signCount, 23)
        XCTAssertEqual(parsed.attestedCredential?.aaguid, Data(count: 16))
        XCTAssertEqual(parsed.attestedCredential?.credentialID.count, 64)
    }

    // MARK: Strictness

    func testRejectsShortData() {
        XCTAssertThrowsWebAuthn(.malformedAuthenticatorData, try AuthenticatorData(Data()))
        XCTAssertThrowsWebAuthn(.malformedAuthenticatorData, try AuthenticatorData(header(flags: 0x01).dropLast()))
    }

    func testRejectsTrailingBytes() {
        XCTAssertThrowsWebAuthn(.malformedAuthenticatorData, try AuthenticatorData(header(flags: 0x01) + Data([0])))
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AuthenticatorData(header(flags: 0x41) + attestedData() + Data([0]))
        )
    }

    func testRejectsATFlagWithoutAttestedData() {
        XCTAssertThrowsWebAuthn(.malformedAuthenticatorData, try AuthenticatorData(header(flags: 0x41)))
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AuthenticatorData(header(flags: 0x41) + Data(count: 17))
        )
    }

    func testRejectsAttestedDataWithoutATFlag() {
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AuthenticatorData(header(flags: 0x01) + attestedData())
        )
    }

    func testRejectsBadCredentialIDLengths() {
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AuthenticatorData(header(flags: 0x41) + attestedData(idLength: 1024)),
            "longer than 1023"
        )
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AuthenticatorData(header(flags: 0x41) + attestedData(idLength: 0))
        )
        // Declared length beyond the data.
        let truncated = header(flags: 0x41) + Data(count: 16) + Data([0x01, 0x00]) + Data(count: 100)
        XCTAssertThrowsWebAuthn(.malformedAuthenticatorData, try AuthenticatorData(truncated))
    }

    func testRejectsMissingOrBrokenCredentialKey() {
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AuthenticatorData(header(flags: 0x41) + attestedData(key: Data()))
        )
        XCTAssertThrowsWebAuthn(
            .malformedCBOR,
            try AuthenticatorData(header(flags: 0x41) + attestedData(key: key.cbor.dropLast()))
        )
        // RS256 is verified now: an RS256 key without its modulus and exponent is broken.
        let rsaLike = CBOR.map([(key: .int(1), value: .int(3)), (key: .int(3), value: .int(-257))]).encoded()
        XCTAssertThrowsWebAuthn(
            .malformedPublicKey,
            try AuthenticatorData(header(flags: 0x41) + attestedData(key: rsaLike))
        )
        let pssLike = CBOR.map([(key: .int(1), value: .int(3)), (key: .int(3), value: .int(-37))]).encoded()
        XCTAssertThrowsWebAuthn(
            .unsupportedAlgorithm,
            try AuthenticatorData(header(flags: 0x41) + attestedData(key: pssLike)),
            "PS256"
        )
    }

    func testExtensionFlagMustMatchData() {
        let extensions = CBOR.map([(key: .text("x"), value: .bool(true))]).encoded()
        XCTAssertNoThrow(try AuthenticatorData(header(flags: 0x81) + extensions))
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AuthenticatorData(header(flags: 0x81)),
            "ED without data"
        )
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AuthenticatorData(header(flags: 0x01) + extensions),
            "data without ED"
        )
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AuthenticatorData(header(flags: 0x81) + CBOR.array([]).encoded()),
            "extensions must be a map"
        )
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try AuthenticatorData(header(flags: 0x81) + extensions + Data([0]))
        )
        XCTAssertNoThrow(try AuthenticatorData(header(flags: 0xC1) + attestedData() + extensions), "AT and ED together")
    }

    func testRejectsBackedUpWithoutBackupEligible() {
        XCTAssertThrowsWebAuthn(.malformedAuthenticatorData, try AuthenticatorData(header(flags: 0x11)))
        XCTAssertNoThrow(try AuthenticatorData(header(flags: 0x19)))
        XCTAssertNoThrow(try AuthenticatorData(header(flags: 0x09)))
    }

    func testRejectsOversizedData() {
        let huge = header(flags: 0x81) + CBOR.map([(key: .text("x"), value: .bytes(Data(count: 17_000)))]).encoded()
        XCTAssertThrowsWebAuthn(.tooLarge, try AuthenticatorData(huge))
    }
}
