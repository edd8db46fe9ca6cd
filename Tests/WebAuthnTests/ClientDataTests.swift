import Foundation
import WebAuthn
import XCTest

final class ClientDataTests: XCTestCase {
    func testParsesBrowserClientData() throws {
        let json = Data(
            #"{"type":"webauthn.get","challenge":"abc","origin":"https://example.com","crossOrigin":true,"topOrigin":"https://top.example","other_keys_can_be_added_here":"do not compare clientDataJSON against a template. See https://goo.gl/yabPex"}"#
                .utf8
        )
        let parsed = try CollectedClientData(json: json)
        XCTAssertEqual(
            parsed,
            CollectedClientData(
                type: "webauthn.get",
                challenge: "abc",
                origin: "https://example.com",
                crossOrigin: true,
                topOrigin: "https://top.example"
            )
        )
    }

    func testOptionalMembersMayBeAbsent() throws {
        let parsed = try CollectedClientData(
            json: Data(#"{"type":"webauthn.create","challenge":"abc","origin":"https://example.com"}"#.utf8)
        )
        XCTAssertNil(parsed.crossOrigin)
        XCTAssertNil(parsed.topOrigin)
    }

    func testRejectsMalformedClientData() {
        let bad = [
            "", "not json", "[]", "null", #"{"type":"webauthn.get","challenge":"abc"}"#,
            #"{"type":"webauthn.get","origin":"https://example.com"}"#,
            #"{"challenge":"abc","origin":"https://example.com"}"#,
            #"{"type":1,"challenge":"abc","origin":"https://example.com"}"#,
            #"{"type":"webauthn.get","challenge":"abc","origin":"https://example.com","crossOrigin":"yes"}"#,
        ]
        for json in bad {
            XCTAssertThrowsWebAuthn(.malformedClientData, try CollectedClientData(json: Data(json.utf8)), json)
        }
        XCTAssertThrowsWebAuthn(
            .malformedClientData,
            try CollectedClientData(json: Data([0x7B, 0xFF, 0x7D])),
            "invalid UTF-8"
        )
    }

    func testSizeLimit() {
        let padding = String(repeating: " ", count: CollectedClientData.maxSize)
        let json = Data(#"{"type":"webauthn.get","challenge":"abc","origin":"https://example.com"}"#.utf8)
        XCTAssertNoThrow(
            try CollectedClientData(json: json + Data(padding.utf8).prefix(CollectedClientData.maxSize - json.count))
        )
        XCTAssertThrowsWebAuthn(.tooLarge, try CollectedClientData(json: json + Data(padding.utf8)))
    }

    func testSerialisationRoundTripsAndEscapes() throws {
        let value = CollectedClientData(
            type: "webauthn.create",
            challenge: "c",
            origin: "https://ex\"am\\ple\n\u{1}.com",
            crossOrigin: nil,
            topOrigin: "https://top"
        )
        let json = value.jsonData()
        XCTAssertEqual(
            String(decoding: json, as: UTF8.self),
            #"{"type":"webauthn.create","challenge":"c","origin":"https://ex\"am\\ple\n\u0001.com","crossOrigin":false,"topOrigin":"https://top"}"#
        )
        var expected = value
        expected.crossOrigin = false
        XCTAssertEqual(try CollectedClientData(json: json), expected)
    }

    func testErrorMessagesQuoteOnlyAShortSanitisedPrefix() throws {
        let hostileOrigin = "https://" + String(repeating: "A", count: 2000) + "\n[FORGED LOG LINE]"
        let challenge = Data(repeating: 7, count: 16)
        let json = CollectedClientData(
            type: "webauthn.get",
            challenge: challenge.base64URLEncodedString(),
            origin: hostileOrigin
        ).jsonData()
        let rp = RelyingParty(id: "example.com", origins: ["https://example.com"])
        do {
            _ = try WebAuthnVerifier.verifyAssertion(
                credentialID: Data([1]),
                clientDataJSON: json,
                authenticatorData: Data(),
                signature: Data(),
                userHandle: nil,
                expectedChallenge: challenge,
                relyingParty: rp,
                credentialPublicKey: SoftwareAuthenticator().publicKey,
                storedSignCount: 0,
                requireUserVerification: false
            )
            XCTFail("expected origin mismatch")
        } catch let error as WebAuthnError {
            XCTAssertEqual(error.code, .originMismatch)
            XCTAssertLessThan(error.message.count, 120)
            XCTAssertFalse(error.message.contains("\n"))
            XCTAssertFalse(error.description.contains("FORGED"))
        }
    }
}
