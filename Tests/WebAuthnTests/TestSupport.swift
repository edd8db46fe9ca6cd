import Crypto
import Foundation
import WebAuthn
import XCTest

/// Asserts that `expression` throws a `WebAuthnError` with `code`.
func XCTAssertThrowsWebAuthn<T>(
    _ code: WebAuthnError.Code,
    _ expression: @autoclosure () throws -> T,
    _ message: String = "",
    file: StaticString = #filePath,
    line: UInt = #line
) {
    do {
        _ = try expression()
        XCTFail("expected \(code.rawValue), nothing was thrown. \(message)", file: file, line: line)
    } catch let error as WebAuthnError {
        XCTAssertEqual(error.code, code, "\(error.message). \(message)", file: file, line: line)
    } catch {
        XCTFail("expected WebAuthnError \(code.rawValue), got \(error). \(message)", file: file, line: line)
    }
}

extension Data {
    /// Test-only: bytes from a hex string (whitespace ignored); traps on bad input.
    init(hex: String) {
        let digits = hex.filter { !$0.isWhitespace }.map { $0 }
        precondition(digits.count % 2 == 0, "odd hex length")
        self.init(stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! })
    }

    /// Test-only: base64url that must decode.
    init(b64u: String) {
        self = Data(base64URLEncoded: b64u)!
    }

    var hex: String { map { String(format: "%02x", $0) }.joined() }
}

/// A software platform authenticator driving the encoding half of the module, so every test
/// starts from a response that verifies and changes exactly one thing.
struct SoftwareAuthenticator {
    var privateKey = P256.Signing.PrivateKey()
    var credentialID = Data((0..<32).map { UInt8($0 ^ 0xA5) })
    var aaguid = Data(repeating: 0x11, count: 16)

    var publicKey: COSEKey { COSEKey(privateKey.publicKey) }

    /// A registration response. Every argument is an opportunity to get one thing wrong.
    func register(
        challenge: Data,
        rpID: String = "example.com",
        origin: String = "https://example.com",
        type: String = "webauthn.create",
        crossOrigin: Bool? = false,
        topOrigin: String? = nil,
        flags: AuthenticatorData.Flags = [.userPresent, .userVerified, .backupEligible, .backedUp],
        signCount: UInt32 = 0,
        format: AttestationFormat = .none,
        attestationKey: P256.Signing.PrivateKey? = nil
    ) -> (clientDataJSON: Data, attestationObject: Data) {
        let clientDataJSON = CollectedClientData(
            type: type,
            challenge: challenge.base64URLEncodedString(),
            origin: origin,
            crossOrigin: crossOrigin,
            topOrigin: topOrigin
        ).jsonData()
        let authenticatorData = AuthenticatorData(
            rpID: rpID,
            flags: flags,
            signCount: signCount,
            attestedCredential: .init(aaguid: aaguid, credentialID: credentialID, publicKey: publicKey)
        )
        let signer = attestationKey ?? privateKey
        let attestationObject = try! AttestationObject.makeAttestationObject(
            authenticatorData: authenticatorData,
            format: format,
            clientDataHash: Data(SHA256.hash(data: clientDataJSON))
        ) { message in try signer.signature(for: message).derRepresentation }
        return (clientDataJSON, attestationObject)
    }

    /// An assertion response over freshly built authenticator data.
    func assert(
        challenge: Data,
        rpID: String = "example.com",
        origin: String = "https://example.com",
        type: String = "webauthn.get",
        crossOrigin: Bool? = false,
        flags: AuthenticatorData.Flags = [.userPresent, .userVerified],
        signCount: UInt32 = 1,
        signingKey: P256.Signing.PrivateKey? = nil
    ) -> (clientDataJSON: Data, authenticatorData: Data, signature: Data) {
        let clientDataJSON = CollectedClientData(
            type: type,
            challenge: challenge.base64URLEncodedString(),
            origin: origin,
            crossOrigin: crossOrigin
        ).jsonData()
        let authenticatorData = AuthenticatorData(rpID: rpID, flags: flags, signCount: signCount).raw
        let signature = sign(authenticatorData: authenticatorData, clientDataJSON: clientDataJSON, with: signingKey)
        return (clientDataJSON, authenticatorData, signature)
    }

    /// A DER signature over authData ‖ SHA-256(clientDataJSON), for hand-built inputs.
    func sign(authenticatorData: Data, clientDataJSON: Data, with key: P256.Signing.PrivateKey? = nil) -> Data {
        let message = authenticatorData + Data(SHA256.hash(data: clientDataJSON))
        return try! (key ?? privateKey).signature(for: message).derRepresentation
    }
}

/// A fresh 32-byte challenge.
func makeChallenge() -> Data {
    Data((0..<32).map { _ in UInt8.random(in: 0...255) })
}
