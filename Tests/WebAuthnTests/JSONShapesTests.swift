import Foundation
import WebAuthn
import XCTest

final class JSONShapesTests: XCTestCase {
    func testCreationOptionsEncodeWithSpecMemberNames() throws {
        let options = PublicKeyCredentialCreationOptionsJSON(
            rp: .init(id: "example.com", name: "Example"),
            user: .init(id: Data("user-1".utf8).base64URLEncodedString(), name: "ada", displayName: "Ada"),
            challenge: Data(repeating: 1, count: 16).base64URLEncodedString(),
            timeout: 60000,
            excludeCredentials: [.init(id: "AQID", transports: ["internal"])],
            authenticatorSelection: .init(residentKey: "required", userVerification: "required"),
            attestation: "none"
        )
        let data = try JSONEncoder().encode(options)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
        XCTAssertEqual(
            Set(object.keys),
            [
                "rp", "user", "challenge", "pubKeyCredParams", "timeout", "excludeCredentials",
                "authenticatorSelection", "attestation",
            ]
        )
        let params = try XCTUnwrap(object["pubKeyCredParams"] as? [[String: Any]])
        XCTAssertEqual(params.first?["type"] as? String, "public-key")
        XCTAssertEqual(params.first?["alg"] as? Int, -7)
        let selection = try XCTUnwrap(object["authenticatorSelection"] as? [String: Any])
        XCTAssertEqual(Set(selection.keys), ["residentKey", "userVerification"], "nil members are omitted")
        XCTAssertEqual(try JSONDecoder().decode(PublicKeyCredentialCreationOptionsJSON.self, from: data), options)
    }

    func testRequestOptionsRoundTrip() throws {
        let options = PublicKeyCredentialRequestOptionsJSON(
            challenge: "AAAA",
            timeout: 30000,
            rpId: "example.com",
            allowCredentials: [.init(id: "AQID")],
            userVerification: "preferred"
        )
        let data = try JSONEncoder().encode(options)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
        XCTAssertEqual(Set(object.keys), ["challenge", "timeout", "rpId", "allowCredentials", "userVerification"])
        XCTAssertEqual(try JSONDecoder().decode(PublicKeyCredentialRequestOptionsJSON.self, from: data), options)
    }

    /// A registration as browsers' toJSON() produce it, carrying py_webauthn's "none" vector.
    func testRegistrationResponseDecodesAndVerifies() throws {
        let json = """
            {
              "id": "9y1xA8Tmg1FEmT-c7_fvWZ_uoTuoih3OvR45_oAK-cwHWhAbXrl2q62iLVTjiyEZ7O7n-CROOY494k7Q3xrs_w",
              "rawId": "9y1xA8Tmg1FEmT-c7_fvWZ_uoTuoih3OvR45_oAK-cwHWhAbXrl2q62iLVTjiyEZ7O7n-CROOY494k7Q3xrs_w",
              "type": "public-key",
              "authenticatorAttachment": "cross-platform",
              "clientExtensionResults": {"credProps": {"rk": true}},
              "response": {
                "clientDataJSON": "eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoiVHdON240V1R5R0tMYzRaWS1xR3NGcUtuSE00bmdscXN5VjBJQ0psTjJUTzlYaVJ5RnRya2FEd1V2c3FsLWdrTEpYUDZmbkYxTWxyWjUzTW00UjdDdnciLCJvcmlnaW4iOiJodHRwOi8vbG9jYWxob3N0OjUwMDAiLCJjcm9zc09yaWdpbiI6ZmFsc2V9",
                "attestationObject": "o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YVjESZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2NFAAAAFwAAAAAAAAAAAAAAAAAAAAAAQPctcQPE5oNRRJk_nO_371mf7qE7qIodzr0eOf6ACvnMB1oQG165dqutoi1U44shGezu5_gkTjmOPeJO0N8a7P-lAQIDJiABIVggSFbUJF-42Ug3pdM8rDRFu_N5oiVEysPDB6n66r_7dZAiWCDUVnB39FlGypL-qAoIO9xWHtJygo2jfDmHl-_eKFRLDA",
                "transports": ["nfc", "usb"],
                "publicKeyAlgorithm": -7
              }
            }
            """
        let response = try JSONDecoder().decode(RegistrationResponseJSON.self, from: Data(json.utf8))
        XCTAssertEqual(response.response.transports, ["nfc", "usb"])
        XCTAssertEqual(response.authenticatorAttachment, "cross-platform")
        let result = try WebAuthnVerifier.verifyRegistration(
            clientDataJSON: response.decodedClientDataJSON,
            attestationObject: response.decodedAttestationObject,
            expectedChallenge: Data(
                b64u: "TwN7n4WTyGKLc4ZY-qGsFqKnHM4nglqsyV0ICJlN2TO9XiRyFtrkaDwUvsql-gkLJXP6fnF1MlrZ53Mm4R7Cvw"
            ),
            relyingParty: RelyingParty(id: "localhost", origins: ["http://localhost:5000"]),
            requireUserVerification: false
        )
        XCTAssertEqual(result.credentialID, try response.decodedRawID)
    }

    func testAuthenticationResponseRoundTripsAndDecodes() throws {
        let authenticator = SoftwareAuthenticator()
        let challenge = makeChallenge()
        let assertion = authenticator.assert(challenge: challenge)
        let id = authenticator.credentialID.base64URLEncodedString()
        let response = AuthenticationResponseJSON(
            id: id,
            rawId: id,
            response: .init(
                clientDataJSON: assertion.clientDataJSON.base64URLEncodedString(),
                authenticatorData: assertion.authenticatorData.base64URLEncodedString(),
                signature: assertion.signature.base64URLEncodedString(),
                userHandle: Data("user-1".utf8).base64URLEncodedString()
            ),
            authenticatorAttachment: "platform"
        )
        let data = try JSONEncoder().encode(response)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
        XCTAssertEqual(
            Set(object.keys),
            ["id", "rawId", "type", "response", "clientExtensionResults", "authenticatorAttachment"]
        )
        XCTAssertEqual((object["clientExtensionResults"] as? [String: Any])?.count, 0)

        let decoded = try JSONDecoder().decode(AuthenticationResponseJSON.self, from: data)
        XCTAssertEqual(decoded, response)
        let result = try WebAuthnVerifier.verifyAssertion(
            credentialID: decoded.decodedRawID,
            clientDataJSON: decoded.decodedClientDataJSON,
            authenticatorData: decoded.decodedAuthenticatorData,
            signature: decoded.decodedSignature,
            userHandle: decoded.decodedUserHandle,
            expectedChallenge: challenge,
            relyingParty: RelyingParty(id: "example.com", origins: ["https://example.com"]),
            credentialPublicKey: authenticator.publicKey,
            storedSignCount: 0,
            requireUserVerification: true,
            expectedUserHandle: Data("user-1".utf8)
        )
        XCTAssertEqual(result.signCount, 1)
    }

    func testAccessorsRejectBadBase64URLWithFieldCodes() throws {
        let good = "AQID"
        func response(
            id: String = good,
            rawId: String = good,
            type: String = "public-key",
            clientDataJSON: String = good,
            authenticatorData: String = good,
            signature: String = good,
            userHandle: String? = nil
        ) -> AuthenticationResponseJSON {
            AuthenticationResponseJSON(
                id: id,
                rawId: rawId,
                type: type,
                response: .init(
                    clientDataJSON: clientDataJSON,
                    authenticatorData: authenticatorData,
                    signature: signature,
                    userHandle: userHandle
                )
            )
        }
        XCTAssertThrowsWebAuthn(.malformedClientData, try response(rawId: "A+B/").decodedRawID)
        XCTAssertThrowsWebAuthn(.malformedClientData, try response(id: "***").decodedRawID)
        XCTAssertThrowsWebAuthn(.malformedClientData, try response(type: "password").decodedRawID)
        XCTAssertThrowsWebAuthn(.credentialIDMismatch, try response(id: "AQIE").decodedRawID)
        XCTAssertEqual(try response(id: "AQI=", rawId: "AQI").decodedRawID, Data([1, 2]), "same bytes, padded or not")
        XCTAssertThrowsWebAuthn(.malformedClientData, try response(clientDataJSON: "e30=!").decodedClientDataJSON)
        XCTAssertThrowsWebAuthn(
            .malformedAuthenticatorData,
            try response(authenticatorData: "a b").decodedAuthenticatorData
        )
        XCTAssertThrowsWebAuthn(.signatureInvalid, try response(signature: "M").decodedSignature)
        XCTAssertThrowsWebAuthn(.malformedClientData, try response(userHandle: "%%").decodedUserHandle)
        XCTAssertNil(try response().decodedUserHandle)

        let registration = RegistrationResponseJSON(
            id: good,
            rawId: good,
            response: .init(clientDataJSON: good, attestationObject: "o2Nm!")
        )
        XCTAssertThrowsWebAuthn(.malformedAttestation, try registration.decodedAttestationObject)
        XCTAssertEqual(try registration.decodedClientDataJSON, Data([1, 2, 3]))
    }

    func testClientExtensionResultsMustBeAnObject() {
        let json =
            #"{"id":"AQID","rawId":"AQID","type":"public-key","clientExtensionResults":[],"response":{"clientDataJSON":"","attestationObject":""}}"#
        XCTAssertThrowsError(try JSONDecoder().decode(RegistrationResponseJSON.self, from: Data(json.utf8)))
    }
}
