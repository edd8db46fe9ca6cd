import Foundation
import XCTest

@testable import Security

/// SecKey's software keys in-process, through Apple's functions: every algorithm a key type
/// offers round-trips, the ones it does not are refused with Apple's error shape, and the
/// representations read back.
final class SecKeyTests: XCTestCase {
    private func makeKey(_ type: CFString, _ bits: Int) throws -> SecKey {
        var error: Unmanaged<CFError>?
        let attributes: [String: Any] = [kSecAttrKeyType as String: type, kSecAttrKeySizeInBits as String: bits]
        guard let key = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
            throw error!.takeRetainedValue() as Error
        }
        return key
    }

    private static let ecSignatures: [SecKeyAlgorithm] = [
        .ecdsaSignatureMessageX962SHA1, .ecdsaSignatureMessageX962SHA256, .ecdsaSignatureMessageX962SHA384,
        .ecdsaSignatureMessageX962SHA512,
        .ecdsaSignatureMessageRFC4754SHA256, .ecdsaSignatureMessageRFC4754SHA512,
    ]

    func testECKeysSignAndVerifyWithEveryMessageAlgorithm() throws {
        for bits in [256, 384, 521] {
            let key = try makeKey(kSecAttrKeyTypeECSECPrimeRandom, bits)
            let pub = try XCTUnwrap(SecKeyCopyPublicKey(key))
            let message = Data("sign me \(bits)".utf8)
            for algorithm in Self.ecSignatures {
                XCTAssertTrue(SecKeyIsAlgorithmSupported(key, .sign, algorithm), "\(bits) \(algorithm.rawValue)")
                XCTAssertTrue(SecKeyIsAlgorithmSupported(pub, .verify, algorithm))
                var error: Unmanaged<CFError>?
                let signature = try XCTUnwrap(
                    SecKeyCreateSignature(key, algorithm, message as CFData, &error),
                    "\(bits) \(algorithm.rawValue)"
                )
                XCTAssertTrue(SecKeyVerifySignature(pub, algorithm, message as CFData, signature, &error))
                XCTAssertFalse(SecKeyVerifySignature(pub, algorithm, Data("other".utf8) as CFData, signature, &error))
                let e = error!.takeRetainedValue()
                XCTAssertEqual(e.domain, NSOSStatusErrorDomain)
                XCTAssertEqual(e.code, Int(errSecVerifyFailed))
                if algorithm.rawValue.contains("RFC4754") {
                    XCTAssertEqual((signature as Data).count, 2 * ((bits + 7) / 8), "raw r‖s")
                } else {
                    XCTAssertEqual((signature as Data).first, 0x30, "DER SEQUENCE")
                }
            }
        }
    }

    /// The digest forms sign what the caller hashed, and check its size as Apple does; a
    /// message-form signature verifies as the digest form of the same hash.
    func testDigestFormsAgreeWithMessageForms() throws {
        let key = try makeKey(kSecAttrKeyTypeECSECPrimeRandom, 256)
        let pub = SecKeyCopyPublicKey(key)!
        let message = Data("agree".utf8)
        let digest = try SecKeyAlgorithmSpec.Hash.sha256.digest(of: message)
        var error: Unmanaged<CFError>?
        let byMessage = SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, &error)!
        XCTAssertTrue(SecKeyVerifySignature(pub, .ecdsaSignatureDigestX962SHA256, digest as CFData, byMessage, &error))
        let byDigest = SecKeyCreateSignature(key, .ecdsaSignatureDigestX962SHA256, digest as CFData, &error)!
        XCTAssertTrue(SecKeyVerifySignature(pub, .ecdsaSignatureMessageX962SHA256, message as CFData, byDigest, &error))
        XCTAssertTrue(SecKeyVerifySignature(pub, .ecdsaSignatureDigestX962, digest as CFData, byDigest, &error))

        XCTAssertNil(SecKeyCreateSignature(key, .ecdsaSignatureDigestX962SHA256, Data(count: 20) as CFData, &error))
        let e = error!.takeRetainedValue()
        XCTAssertEqual(e.code, Int(errSecParam))
        XCTAssertTrue(e.localizedDescription.contains("bad digest size"), e.localizedDescription)
    }

    func testWrongKeyForTheOperationIsRefusedWithErrSecParam() throws {
        let ec = try makeKey(kSecAttrKeyTypeECSECPrimeRandom, 256)
        let pub = SecKeyCopyPublicKey(ec)!
        XCTAssertFalse(
            SecKeyIsAlgorithmSupported(pub, .sign, .ecdsaSignatureMessageX962SHA256),
            "a public key does not sign"
        )
        XCTAssertFalse(
            SecKeyIsAlgorithmSupported(ec, .encrypt, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM),
            "encrypt with the public key"
        )
        XCTAssertFalse(
            SecKeyIsAlgorithmSupported(ec, .sign, .rsaSignatureMessagePSSSHA256),
            "an EC key does not do RSA"
        )
        XCTAssertFalse(
            SecKeyIsAlgorithmSupported(ec, .sign, .eciesEncryptionStandardX963SHA256AESGCM),
            "not a signature algorithm"
        )
        XCTAssertFalse(SecKeyIsAlgorithmSupported(ec, .sign, SecKeyAlgorithm(rawValue: "algid:sign:made-up")))
        XCTAssertFalse(
            SecKeyIsAlgorithmSupported(ec, .sign, .ecdsaSignatureMessageX962SHA224),
            "no SHA-224 in swift-crypto"
        )
        var error: Unmanaged<CFError>?
        XCTAssertNil(SecKeyCreateSignature(pub, .ecdsaSignatureMessageX962SHA256, Data() as CFData, &error))
        XCTAssertEqual(error!.takeRetainedValue().code, Int(errSecParam))
        XCTAssertNil(SecKeyCreateSignature(ec, .ecdsaSignatureMessageX962SHA224, Data() as CFData, &error))
        XCTAssertEqual(error!.takeRetainedValue().code, Int(errSecUnimplemented))
        // Without an error pointer the call still fails cleanly.
        XCTAssertNil(SecKeyCreateSignature(pub, .ecdsaSignatureMessageX962SHA256, Data() as CFData, nil))
    }

    func testECIESRoundTripsForEveryVariantAndCurve() throws {
        let algorithms: [SecKeyAlgorithm] = [
            .eciesEncryptionStandardX963SHA256AESGCM, .eciesEncryptionCofactorX963SHA256AESGCM,
            .eciesEncryptionStandardVariableIVX963SHA256AESGCM, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
            .eciesEncryptionCofactorVariableIVX963SHA384AESGCM, .eciesEncryptionStandardX963SHA1AESGCM,
            .eciesEncryptionCofactorVariableIVX963SHA512AESGCM,
        ]
        for bits in [256, 384, 521] {
            let key = try makeKey(kSecAttrKeyTypeECSECPrimeRandom, bits)
            let pub = SecKeyCopyPublicKey(key)!
            for algorithm in algorithms {
                var error: Unmanaged<CFError>?
                let plaintext = Data("a secret for \(algorithm.rawValue)".utf8)
                let ciphertext =
                    try XCTUnwrap(SecKeyCreateEncryptedData(pub, algorithm, plaintext as CFData, &error)) as Data
                XCTAssertEqual(ciphertext.count, 1 + 2 * ((bits + 7) / 8) + plaintext.count + 16)
                XCTAssertEqual(
                    SecKeyCreateDecryptedData(key, algorithm, ciphertext as CFData, &error) as Data?,
                    plaintext
                )
                var tampered = ciphertext
                tampered[tampered.count - 1] ^= 1
                XCTAssertNil(SecKeyCreateDecryptedData(key, algorithm, tampered as CFData, &error))
                XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecParam))
            }
        }
    }

    func testECDHBothSidesDeriveTheSameBytes() throws {
        let alice = try makeKey(kSecAttrKeyTypeECSECPrimeRandom, 384)
        let bob = try makeKey(kSecAttrKeyTypeECSECPrimeRandom, 384)
        var error: Unmanaged<CFError>?
        let raw1 =
            SecKeyCopyKeyExchangeResult(
                alice,
                .ecdhKeyExchangeStandard,
                SecKeyCopyPublicKey(bob)!,
                [:] as CFDictionary,
                &error
            ) as Data?
        let raw2 =
            SecKeyCopyKeyExchangeResult(
                bob,
                .ecdhKeyExchangeCofactor,
                SecKeyCopyPublicKey(alice)!,
                [:] as CFDictionary,
                &error
            ) as Data?
        XCTAssertEqual(raw1?.count, 48)
        XCTAssertEqual(raw1, raw2)
        let params: [String: Any] = [
            kSecKeyKeyExchangeParameterRequestedSize as String: 32,
            kSecKeyKeyExchangeParameterSharedInfo as String: Data("info".utf8),
        ]
        let k1 =
            SecKeyCopyKeyExchangeResult(
                alice,
                .ecdhKeyExchangeStandardX963SHA256,
                SecKeyCopyPublicKey(bob)!,
                params as CFDictionary,
                &error
            ) as Data?
        let k2 =
            SecKeyCopyKeyExchangeResult(
                bob,
                .ecdhKeyExchangeStandardX963SHA256,
                SecKeyCopyPublicKey(alice)!,
                params as CFDictionary,
                &error
            ) as Data?
        XCTAssertEqual(k1?.count, 32)
        XCTAssertEqual(k1, k2)
        XCTAssertNotEqual(k1, raw1?.prefix(32))
        // The KDF forms need the requested size, as Apple's.
        XCTAssertNil(
            SecKeyCopyKeyExchangeResult(
                alice,
                .ecdhKeyExchangeStandardX963SHA256,
                SecKeyCopyPublicKey(bob)!,
                [:] as CFDictionary,
                &error
            )
        )
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecParam))
        // Different curves do not agree.
        let p256 = try makeKey(kSecAttrKeyTypeECSECPrimeRandom, 256)
        XCTAssertNil(
            SecKeyCopyKeyExchangeResult(
                alice,
                .ecdhKeyExchangeStandard,
                SecKeyCopyPublicKey(p256)!,
                [:] as CFDictionary,
                &error
            )
        )
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecParam))
    }

    func testRSASignaturesAndEncryption() throws {
        let key = try makeKey(kSecAttrKeyTypeRSA, 2048)
        let pub = SecKeyCopyPublicKey(key)!
        XCTAssertEqual(SecKeyGetBlockSize(key), 256)
        var error: Unmanaged<CFError>?
        let message = Data("rsa".utf8)
        for algorithm: SecKeyAlgorithm in [
            .rsaSignatureMessagePKCS1v15SHA256, .rsaSignatureMessagePKCS1v15SHA1, .rsaSignatureMessagePSSSHA256,
            .rsaSignatureMessagePSSSHA512,
        ] {
            let s = try XCTUnwrap(SecKeyCreateSignature(key, algorithm, message as CFData, &error), algorithm.rawValue)
            XCTAssertEqual((s as Data).count, 256)
            XCTAssertTrue(SecKeyVerifySignature(pub, algorithm, message as CFData, s, &error), algorithm.rawValue)
        }
        XCTAssertFalse(
            SecKeyIsAlgorithmSupported(key, .sign, .rsaSignatureDigestPKCS1v15SHA256),
            "swift-crypto signs no caller digest"
        )
        XCTAssertFalse(SecKeyIsAlgorithmSupported(key, .sign, .rsaSignatureRaw))
        for algorithm: SecKeyAlgorithm in [
            .rsaEncryptionOAEPSHA256, .rsaEncryptionOAEPSHA1, .rsaEncryptionPKCS1, .rsaEncryptionOAEPSHA256AESGCM,
            .rsaEncryptionOAEPSHA1AESGCM,
        ] {
            let c = try XCTUnwrap(
                SecKeyCreateEncryptedData(pub, algorithm, message as CFData, &error),
                algorithm.rawValue
            )
            XCTAssertEqual(SecKeyCreateDecryptedData(key, algorithm, c, &error) as Data?, message)
        }
        XCTAssertFalse(SecKeyIsAlgorithmSupported(pub, .encrypt, .rsaEncryptionOAEPSHA384))
    }

    func testExternalRepresentationsRoundTrip() throws {
        // P-384's public key and P-256's private key are both 97 bytes: the key class tells them apart.
        for (type, bits) in [
            (kSecAttrKeyTypeECSECPrimeRandom, 256), (kSecAttrKeyTypeECSECPrimeRandom, 384),
            (kSecAttrKeyTypeECSECPrimeRandom, 521),
            (kSecAttrKeyTypeRSA, 2048),
        ] {
            let key = try makeKey(type, bits)
            var error: Unmanaged<CFError>?
            let privateData = try XCTUnwrap(SecKeyCopyExternalRepresentation(key, &error))
            let publicData = try XCTUnwrap(SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(key)!, &error))
            if type == kSecAttrKeyTypeECSECPrimeRandom {
                let n = (bits + 7) / 8
                XCTAssertEqual((privateData as Data).count, 1 + 3 * n)
                XCTAssertEqual((publicData as Data).count, 1 + 2 * n)
                XCTAssertEqual((publicData as Data).first, 0x04)
            }
            let back = try XCTUnwrap(
                SecKeyCreateWithData(
                    privateData,
                    [
                        kSecAttrKeyType: type, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                        kSecAttrKeySizeInBits: bits,
                    ] as CFDictionary,
                    &error
                )
            )
            XCTAssertEqual(SecKeyCopyExternalRepresentation(back, nil) as Data?, privateData as Data)
            let backPublic = try XCTUnwrap(
                SecKeyCreateWithData(
                    publicData,
                    [kSecAttrKeyType: type, kSecAttrKeyClass: kSecAttrKeyClassPublic] as CFDictionary,
                    &error
                )
            )
            let algorithm: SecKeyAlgorithm =
                type == kSecAttrKeyTypeRSA ? .rsaSignatureMessagePSSSHA256 : .ecdsaSignatureMessageX962SHA256
            let s = SecKeyCreateSignature(back, algorithm, Data("x".utf8) as CFData, &error)!
            XCTAssertTrue(SecKeyVerifySignature(backPublic, algorithm, Data("x".utf8) as CFData, s, &error))

            let attributes = try XCTUnwrap(SecKeyCopyAttributes(key) as? [String: Any])
            XCTAssertEqual(attributes[kSecAttrKeyClass as String] as? String, kSecAttrKeyClassPrivate as String)
            XCTAssertEqual(attributes[kSecAttrKeyType as String] as? String, type as String)
            XCTAssertEqual((attributes[kSecAttrKeySizeInBits as String] as? NSNumber)?.intValue, bits)
            XCTAssertEqual((attributes[kSecAttrApplicationLabel as String] as? Data)?.count, 20)
            XCTAssertEqual(attributes[kSecValueData as String] as? Data, privateData as Data)
            XCTAssertEqual((attributes[kSecAttrCanSign as String] as? NSNumber)?.boolValue, true)
        }
    }

    func testBadKeyDataAndParametersAreRefused() {
        var error: Unmanaged<CFError>?
        XCTAssertNil(
            SecKeyCreateWithData(
                Data([4, 1, 2]) as CFData,
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic]
                    as CFDictionary,
                &error
            )
        )
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecDecode))
        var offCurve = Data([4]) + Data(repeating: 1, count: 64)
        offCurve[1] = 7
        XCTAssertNil(
            SecKeyCreateWithData(
                offCurve as CFData,
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic]
                    as CFDictionary,
                &error
            )
        )
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecDecode))
        XCTAssertNil(
            SecKeyCreateWithData(Data() as CFData, [kSecAttrKeyClass: kSecAttrKeyClassPublic] as CFDictionary, &error)
        )
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecParam))
        XCTAssertNil(
            SecKeyCreateRandomKey(
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 192] as CFDictionary,
                &error
            )
        )
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecParam))
        XCTAssertNil(
            SecKeyCreateRandomKey(
                [kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 512] as CFDictionary,
                &error
            )
        )
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecParam))
        XCTAssertNil(
            SecKeyCreateRandomKey(
                [kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrTokenID: kSecAttrTokenIDSecureEnclave] as CFDictionary,
                &error
            )
        )
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecParam))
        XCTAssertNil(SecKeyCreateRandomKey([:] as CFDictionary, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecParam))
    }

    /// A digest the enclave signs is P-256's reading of any hash: the leftmost 256 bits, or the
    /// value with zeros in front — signatures over it verify as signatures over the original.
    func testDigestsReadAsP256Reads() throws {
        let key = try makeKey(kSecAttrKeyTypeECSECPrimeRandom, 256)
        let pub = SecKeyCopyPublicKey(key)!
        guard case .ec(let material) = key.material else { return XCTFail("not an EC key") }
        for size in [20, 32, 48, 64] {
            let digest = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })
            let signed = try material.sign(digest: SecKey.p256Digest(digest))
            XCTAssertTrue(
                SecKeyVerifySignature(pub, .ecdsaSignatureDigestX962, digest as CFData, signed.der as CFData, nil),
                "\(size)-byte digest"
            )
        }
    }
}
