import Crypto
import Foundation
import WebAuthn
import XCTest
import _CryptoExtras

final class COSEKeyTests: XCTestCase {
    /// An ES256 COSE key from py_webauthn's test suite (a real authenticator's key).
    let pyWebAuthnKey = Data(
        b64u: "pQECAyYgASFYIIeDTe-gN8A-zQclHoRnGFWN8ehM1b7yAsa8I8KIvmplIlgg4nFGT5px8o6gpPZZhO01wdy9crDSA_Ngtkx0vGpvPHI"
    )

    func map(
        kty: CBOR? = .int(2),
        alg: CBOR? = .int(-7),
        crv: CBOR? = .int(1),
        x: CBOR? = nil,
        y: CBOR? = nil,
        extra: [(key: CBOR, value: CBOR)] = []
    ) -> Data {
        let raw = P256.Signing.PrivateKey().publicKey.rawRepresentation
        var entries: [(key: CBOR, value: CBOR)] = []
        if let kty { entries.append((key: .int(1), value: kty)) }
        if let alg { entries.append((key: .int(3), value: alg)) }
        if let crv { entries.append((key: .int(-1), value: crv)) }
        entries.append((key: .int(-2), value: x ?? .bytes(raw.prefix(32))))
        entries.append((key: .int(-3), value: y ?? .bytes(raw.suffix(32))))
        return CBOR.map(entries + extra).encoded()
    }

    func testEncodesCanonicalES256Layout() {
        let key = P256.Signing.PrivateKey().publicKey
        let raw = key.rawRepresentation
        let expected = Data(hex: "a5010203262001215820") + raw.prefix(32) + Data(hex: "225820") + raw.suffix(32)
        XCTAssertEqual(COSEKey(key).cbor, expected)
    }

    func testRoundTrips() throws {
        let key = COSEKey(P256.Signing.PrivateKey().publicKey)
        let decoded = try COSEKey(cbor: key.cbor)
        XCTAssertEqual(decoded, key)
        XCTAssertEqual(decoded.p256?.rawRepresentation, key.p256?.rawRepresentation)
    }

    func testDecodesKnownKeyAndReencodesIdentically() throws {
        let key = try COSEKey(cbor: pyWebAuthnKey)
        XCTAssertEqual(key.cbor, pyWebAuthnKey)
        XCTAssertEqual(key.p256?.rawRepresentation.prefix(4), Data(hex: "87834def"))
    }

    func testIgnoresExtraParameters() throws {
        XCTAssertNoThrow(try COSEKey(cbor: map(extra: [(key: .int(2), value: .bytes(Data([1, 2, 3])))])))
    }

    func testRejectsOtherAlgorithmsAsUnsupported() {
        XCTAssertThrowsWebAuthn(.unsupportedAlgorithm, try COSEKey(cbor: map(kty: .int(3))), "RSA")
        XCTAssertThrowsWebAuthn(.unsupportedAlgorithm, try COSEKey(cbor: map(kty: .int(1))), "OKP")
        XCTAssertThrowsWebAuthn(.unsupportedAlgorithm, try COSEKey(cbor: map(alg: .int(-35))), "ES384")
        XCTAssertThrowsWebAuthn(.unsupportedAlgorithm, try COSEKey(cbor: map(alg: .int(-8))), "EdDSA")
        XCTAssertThrowsWebAuthn(.unsupportedAlgorithm, try COSEKey(cbor: map(crv: .int(2))), "P-384")
        XCTAssertThrowsWebAuthn(.unsupportedAlgorithm, try COSEKey(cbor: map(alg: .int(-37))), "PS256")
    }

    /// py_webauthn's RS256 and EdDSA credential keys (refused as unsupported before): parsed, and
    /// encoded back to the same bytes.
    func testRS256AndEdDSAKeysFromPyWebAuthn() throws {
        let rsa = Data(
            b64u:
                "pAEDAzkBACBZAQDfV20epzvQP-HtcdDpX-cGzdOxy73WQEvsU7Dnr9UWJophEfpngouvgnRLXaEUn_d8HGkp_HIx8rrpkx4BVs6X_B6ZjhLlezjIdJbLbVeb92BaEsmNn1HW2N9Xj2QM8cH-yx28_vCjf82ahQ9gyAr552Bn96G22n8jqFRQKdVpO-f-bvpvaP3IQ9F5LCX7CUaxptgbog1SFO6FI6ob5SlVVB00lVXsaYg8cIDZxCkkENkGiFPgwEaZ7995SCbiyCpUJbMqToLMgojPkAhWeyktu7TlK6UBWdJMHc3FPAIs0lH_2_2hKS-mGI1uZAFVAfW1X-mzKL0czUm2P1UlUox7IUMBAAE"
        )
        let rsaKey = try COSEKey(cbor: rsa)
        XCTAssertEqual(rsaKey.algorithm, .rs256)
        XCTAssertEqual(rsaKey.cbor, rsa)
        let okp = Data(b64u: "pAEBAycgBiFYIMz6_SUFLiDid2Yhlq0YboyJ-CDrIrNpkPUGmJp4D3Dp")
        let edKey = try COSEKey(cbor: okp)
        XCTAssertEqual(edKey.algorithm, .edDSA)
        XCTAssertEqual(edKey.cbor, okp)
    }

    func testRejectsMalformedEdDSAAndRSAKeys() throws {
        func okp(crv: Int = 6, x: Data = Data(repeating: 7, count: 32)) -> Data {
            CBOR.map([
                (key: .int(1), value: .int(1)), (key: .int(3), value: .int(-8)), (key: .int(-1), value: .int(crv)),
                (key: .int(-2), value: .bytes(x)),
            ]).encoded()
        }
        func rsa(n: Data?, e: Data? = Data([1, 0, 1])) -> Data {
            var entries: [(key: CBOR, value: CBOR)] = [
                (key: .int(1), value: .int(3)), (key: .int(3), value: .int(-257)),
            ]
            if let n { entries.append((key: .int(-1), value: .bytes(n))) }
            if let e { entries.append((key: .int(-2), value: .bytes(e))) }
            return CBOR.map(entries).encoded()
        }
        XCTAssertNoThrow(try COSEKey(cbor: okp(x: Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)))
        XCTAssertThrowsWebAuthn(.unsupportedAlgorithm, try COSEKey(cbor: okp(crv: 4)), "X25519 does not sign")
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: okp(x: Data(count: 31))))
        let modulus = try _RSA.Signing.PrivateKey(keySize: .bits2048).publicKey.getKeyPrimitives().modulus
        XCTAssertNoThrow(try COSEKey(cbor: rsa(n: modulus)))
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: rsa(n: Data(modulus.prefix(128)))), "1024 bits")
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: rsa(n: modulus, e: nil)))
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: rsa(n: nil)))
        XCTAssertThrowsWebAuthn(
            .malformedPublicKey,
            try COSEKey(cbor: rsa(n: Data(repeating: 0xFF, count: 1100))),
            "over 8192 bits"
        )
    }

    func testEachAlgorithmsSignatureEncoding() throws {
        let message = Data("hello".utf8)
        let ed = Curve25519.Signing.PrivateKey()
        let edKey = COSEKey(ed.publicKey)
        let edSignature = try ed.signature(for: message)
        XCTAssertTrue(edKey.isValidSignature(edSignature, for: message))
        XCTAssertFalse(edKey.isValidSignature(edSignature, for: Data("hellO".utf8)))
        XCTAssertFalse(edKey.isValidSignature(Data(edSignature.prefix(63)), for: message))
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let rsaKey = try COSEKey(rsa.publicKey)
        XCTAssertTrue(
            rsaKey.isValidSignature(
                try rsa.signature(for: message, padding: .insecurePKCS1v1_5).rawRepresentation,
                for: message
            )
        )
        XCTAssertFalse(
            rsaKey.isValidSignature(try rsa.signature(for: message, padding: .PSS).rawRepresentation, for: message),
            "PSS is PS256, not RS256"
        )
        XCTAssertFalse(rsaKey.isValidSignature(Data(count: 256), for: message))
        XCTAssertFalse(rsaKey.isValidSignature(Data(), for: message))
    }

    func testRejectsMalformedKeys() {
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: map(alg: nil)), "alg is required in WebAuthn")
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: map(kty: nil)))
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: map(crv: nil)))
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: map(kty: .text("EC2"))))
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: map(x: .bytes(Data(count: 31)))))
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: map(y: .bytes(Data(count: 33)))))
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: map(y: .bool(true))), "compressed form")
        XCTAssertThrowsWebAuthn(
            .malformedPublicKey,
            try COSEKey(cbor: map(x: .bytes(Data(count: 32)), y: .bytes(Data(repeating: 1, count: 32)))),
            "not on the curve"
        )
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: CBOR.array([]).encoded()))
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: Data(hex: "a501")), "truncated CBOR")
        XCTAssertThrowsWebAuthn(.malformedPublicKey, try COSEKey(cbor: pyWebAuthnKey + Data([0])), "trailing byte")
    }

    func testSignatureCheckAcceptsDEROnly() throws {
        let privateKey = P256.Signing.PrivateKey()
        let key = COSEKey(privateKey.publicKey)
        let message = Data("hello".utf8)
        let signature = try privateKey.signature(for: message)
        XCTAssertTrue(key.isValidSignature(signature.derRepresentation, for: message))
        XCTAssertFalse(
            key.isValidSignature(signature.rawRepresentation, for: message),
            "raw r||s is not WebAuthn's encoding"
        )
        XCTAssertFalse(key.isValidSignature(signature.derRepresentation, for: Data("hellO".utf8)))
        XCTAssertFalse(key.isValidSignature(Data(), for: message))
    }
}
