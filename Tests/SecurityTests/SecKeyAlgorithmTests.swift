import Foundation
import XCTest

@testable import Security

/// Every SecKeyAlgorithm of Apple's SecKey.h, by its Swift name, with Apple's string, and each
/// read into what it asks for (docs/apple-api/seckeyalgorithm.tsv is our extract of Apple's
/// SecKeyAdaptors.m).
final class SecKeyAlgorithmTests: XCTestCase {
    private static let ours: [String: SecKeyAlgorithm] = [
        "ecdsaSignatureMessageX962SHA256": .ecdsaSignatureMessageX962SHA256,
        "ecdsaSignatureDigestX962": .ecdsaSignatureDigestX962,
        "ecdsaSignatureRFC4754": .ecdsaSignatureRFC4754, "ecdsaSignatureDigestRFC4754": .ecdsaSignatureDigestRFC4754,
        "ecdsaSignatureMessageRFC4754SHA512": .ecdsaSignatureMessageRFC4754SHA512,
        "rsaSignatureDigestPSSSHA256": .rsaSignatureDigestPSSSHA256,
        "rsaSignatureMessagePKCS1v15SHA1": .rsaSignatureMessagePKCS1v15SHA1,
        "rsaEncryptionOAEPSHA256AESGCM": .rsaEncryptionOAEPSHA256AESGCM, "rsaEncryptionRaw": .rsaEncryptionRaw,
        "eciesEncryptionCofactorVariableIVX963SHA256AESGCM": .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
        "eciesEncryptionStandardX963SHA1AESGCM": .eciesEncryptionStandardX963SHA1AESGCM,
        "ecdhKeyExchangeCofactorX963SHA512": .ecdhKeyExchangeCofactorX963SHA512,
        "ecdhKeyExchangeStandard": .ecdhKeyExchangeStandard,
    ]

    private func appleTable() throws -> [(swiftName: String, value: String)] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("docs/apple-api/seckeyalgorithm.tsv")
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n").dropFirst()
        return lines.map { line in
            let f = line.split(separator: "\t", omittingEmptySubsequences: false)
            return (String(f[0].replacingOccurrences(of: "SecKeyAlgorithm.", with: "")), String(f[2]))
        }
    }

    func testEveryAppleAlgorithmHasItsStringAndASpec() throws {
        let table = try appleTable()
        XCTAssertEqual(table.count, 87)
        for (name, value) in table {
            let algorithm = SecKeyAlgorithm(rawValue: value)
            XCTAssertNotNil(algorithm.spec, "\(name) (\(value)) has no spec")
            if let ours = Self.ours[name] { XCTAssertEqual(ours.rawValue, value, name) }
        }
        XCTAssertEqual(Set(table.map(\.value)).count, 87, "strings are distinct")
    }

    func testSpecsReadTheAlgorithm() {
        let cases: [(SecKeyAlgorithm, SecKeyAlgorithmSpec)] = [
            (.ecdsaSignatureMessageX962SHA256, .ecdsa(.message, .sha256, .x962)),
            (.ecdsaSignatureDigestX962SHA1, .ecdsa(.digest, .sha1, .x962)),
            (.ecdsaSignatureRFC4754, .ecdsa(.digest, nil, .rfc4754)),
            (.ecdsaSignatureMessageRFC4754SHA384, .ecdsa(.message, .sha384, .rfc4754)),
            (.rsaSignatureDigestPKCS1v15Raw, .rsaSignature(.digest, nil, .pkcs1v15)),
            (.rsaSignatureMessagePSSSHA512, .rsaSignature(.message, .sha512, .pss)),
            (.rsaEncryptionOAEPSHA1, .rsaEncryption(.oaep(.sha1))),
            (.rsaEncryptionPKCS1, .rsaEncryption(.pkcs1)),
            (.eciesEncryptionStandardX963SHA256AESGCM, .ecies(cofactor: false, hash: .sha256, variableIV: false)),
            (
                .eciesEncryptionCofactorVariableIVX963SHA384AESGCM,
                .ecies(cofactor: true, hash: .sha384, variableIV: true)
            ),
            (.ecdhKeyExchangeStandard, .ecdh(cofactor: false, kdf: nil)),
            (.ecdhKeyExchangeCofactorX963SHA256, .ecdh(cofactor: true, kdf: .sha256)),
        ]
        for (algorithm, spec) in cases { XCTAssertEqual(algorithm.spec, spec, algorithm.rawValue) }
        XCTAssertNil(SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:message-X962:SHA3").spec)
    }

    func testOperationTypesHaveApplesValues() {
        XCTAssertEqual(SecKeyOperationType.sign.rawValue, 0)
        XCTAssertEqual(SecKeyOperationType.verify.rawValue, 1)
        XCTAssertEqual(SecKeyOperationType.encrypt.rawValue, 2)
        XCTAssertEqual(SecKeyOperationType.decrypt.rawValue, 3)
        XCTAssertEqual(SecKeyOperationType.keyExchange.rawValue, 4)
    }

    /// What Linux lacks, exactly (docs/apple-api-coverage.md says the same): every other algorithm
    /// runs on some software key. Secure Enclave keys run the EC ones (AppleAPITests).
    func testEveryAlgorithmRunsOnSomeKeyExceptWhatLinuxLacks() throws {
        var keys: [SecKey] = []
        for (type, bits) in [(kSecAttrKeyTypeECSECPrimeRandom, 256), (kSecAttrKeyTypeRSA, 2048)] {
            let key = try XCTUnwrap(
                SecKeyCreateRandomKey([kSecAttrKeyType: type, kSecAttrKeySizeInBits: bits] as CFDictionary, nil)
            )
            keys += [key, SecKeyCopyPublicKey(key)!]
        }
        let operations: [SecKeyOperationType] = [.sign, .verify, .encrypt, .decrypt, .keyExchange]
        var lacking: Set<String> = []
        for (name, value) in try appleTable() {
            let algorithm = SecKeyAlgorithm(rawValue: value)
            let runs = keys.contains { key in operations.contains { SecKeyIsAlgorithmSupported(key, $0, algorithm) } }
            if !runs { lacking.insert(name) }
        }
        let sha224 = lacking.filter { $0.contains("SHA224") }
        XCTAssertEqual(sha224.count, 16, "swift-crypto has no SHA-224")
        XCTAssertEqual(
            lacking.subtracting(sha224),
            [
                "rsaSignatureRaw", "rsaSignatureDigestPKCS1v15Raw",
                "rsaSignatureDigestPKCS1v15SHA1", "rsaSignatureDigestPKCS1v15SHA256",
                "rsaSignatureDigestPKCS1v15SHA384", "rsaSignatureDigestPKCS1v15SHA512",
                "rsaSignatureDigestPSSSHA1", "rsaSignatureDigestPSSSHA256", "rsaSignatureDigestPSSSHA384",
                "rsaSignatureDigestPSSSHA512",
                "rsaEncryptionRaw", "rsaEncryptionOAEPSHA384", "rsaEncryptionOAEPSHA512",
                "rsaEncryptionOAEPSHA384AESGCM", "rsaEncryptionOAEPSHA512AESGCM",
            ]
        )
        XCTAssertEqual(87 - lacking.count, 56)
    }
}
