import Foundation

/// Security's `SecKeyAlgorithm` (a CFString in Apple's SDK), with the string values of Apple's
/// Security sources (SecKeyAdaptors.m). Which of them a key can run: `SecKeyIsAlgorithmSupported`,
/// and docs/apple-api-coverage.md. Our difference: `rawValue` is a `String`, not a `CFString`.
public struct SecKeyAlgorithm: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public static let rsaSignatureRaw = SecKeyAlgorithm(rawValue: "algid:sign:RSA:raw")
    public static let rsaSignatureDigestPKCS1v15Raw = SecKeyAlgorithm(rawValue: "algid:sign:RSA:digest-PKCS1v15")
    public static let rsaSignatureDigestPKCS1v15SHA1 = SecKeyAlgorithm(rawValue: "algid:sign:RSA:digest-PKCS1v15:SHA1")
    public static let rsaSignatureDigestPKCS1v15SHA224 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:digest-PKCS1v15:SHA224"
    )
    public static let rsaSignatureDigestPKCS1v15SHA256 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:digest-PKCS1v15:SHA256"
    )
    public static let rsaSignatureDigestPKCS1v15SHA384 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:digest-PKCS1v15:SHA384"
    )
    public static let rsaSignatureDigestPKCS1v15SHA512 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:digest-PKCS1v15:SHA512"
    )
    public static let rsaSignatureDigestPSSSHA1 = SecKeyAlgorithm(rawValue: "algid:sign:RSA:digest-PSS:SHA1:SHA1:20")
    public static let rsaSignatureDigestPSSSHA224 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:digest-PSS:SHA224:SHA224:24"
    )
    public static let rsaSignatureDigestPSSSHA256 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:digest-PSS:SHA256:SHA256:32"
    )
    public static let rsaSignatureDigestPSSSHA384 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:digest-PSS:SHA384:SHA384:48"
    )
    public static let rsaSignatureDigestPSSSHA512 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:digest-PSS:SHA512:SHA512:64"
    )
    public static let rsaSignatureMessagePKCS1v15SHA1 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PKCS1v15:SHA1"
    )
    public static let rsaSignatureMessagePKCS1v15SHA224 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PKCS1v15:SHA224"
    )
    public static let rsaSignatureMessagePKCS1v15SHA256 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PKCS1v15:SHA256"
    )
    public static let rsaSignatureMessagePKCS1v15SHA384 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PKCS1v15:SHA384"
    )
    public static let rsaSignatureMessagePKCS1v15SHA512 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PKCS1v15:SHA512"
    )
    public static let rsaSignatureMessagePSSSHA1 = SecKeyAlgorithm(rawValue: "algid:sign:RSA:message-PSS:SHA1:SHA1:20")
    public static let rsaSignatureMessagePSSSHA224 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PSS:SHA224:SHA224:24"
    )
    public static let rsaSignatureMessagePSSSHA256 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PSS:SHA256:SHA256:32"
    )
    public static let rsaSignatureMessagePSSSHA384 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PSS:SHA384:SHA384:48"
    )
    public static let rsaSignatureMessagePSSSHA512 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PSS:SHA512:SHA512:64"
    )
    public static let ecdsaSignatureRFC4754 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:RFC4754")
    public static let ecdsaSignatureDigestX962 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:digest-X962")
    public static let ecdsaSignatureDigestRFC4754 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:digest-RFC4754")
    public static let ecdsaSignatureDigestX962SHA1 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:digest-X962:SHA1")
    public static let ecdsaSignatureDigestX962SHA224 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:digest-X962:SHA224")
    public static let ecdsaSignatureDigestX962SHA256 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:digest-X962:SHA256")
    public static let ecdsaSignatureDigestX962SHA384 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:digest-X962:SHA384")
    public static let ecdsaSignatureDigestX962SHA512 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:digest-X962:SHA512")
    public static let ecdsaSignatureMessageX962SHA1 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:message-X962:SHA1")
    public static let ecdsaSignatureMessageX962SHA224 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:message-X962:SHA224"
    )
    public static let ecdsaSignatureMessageX962SHA256 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:message-X962:SHA256"
    )
    public static let ecdsaSignatureMessageX962SHA384 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:message-X962:SHA384"
    )
    public static let ecdsaSignatureMessageX962SHA512 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:message-X962:SHA512"
    )
    public static let ecdsaSignatureDigestRFC4754SHA1 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:digest-RFC4754:SHA1"
    )
    public static let ecdsaSignatureDigestRFC4754SHA224 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:digest-RFC4754:SHA224"
    )
    public static let ecdsaSignatureDigestRFC4754SHA256 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:digest-RFC4754:SHA256"
    )
    public static let ecdsaSignatureDigestRFC4754SHA384 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:digest-RFC4754:SHA384"
    )
    public static let ecdsaSignatureDigestRFC4754SHA512 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:digest-RFC4754:SHA512"
    )
    public static let ecdsaSignatureMessageRFC4754SHA1 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:message-RFC4754:SHA1"
    )
    public static let ecdsaSignatureMessageRFC4754SHA224 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:message-RFC4754:SHA224"
    )
    public static let ecdsaSignatureMessageRFC4754SHA256 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:message-RFC4754:SHA256"
    )
    public static let ecdsaSignatureMessageRFC4754SHA384 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:message-RFC4754:SHA384"
    )
    public static let ecdsaSignatureMessageRFC4754SHA512 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:message-RFC4754:SHA512"
    )
    public static let rsaEncryptionRaw = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:raw")
    public static let rsaEncryptionPKCS1 = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:PKCS1")
    public static let rsaEncryptionOAEPSHA1 = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:OAEP:SHA1")
    public static let rsaEncryptionOAEPSHA224 = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:OAEP:SHA224")
    public static let rsaEncryptionOAEPSHA256 = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:OAEP:SHA256")
    public static let rsaEncryptionOAEPSHA384 = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:OAEP:SHA384")
    public static let rsaEncryptionOAEPSHA512 = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:OAEP:SHA512")
    public static let rsaEncryptionOAEPSHA1AESGCM = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:OAEP:SHA1:AESGCM")
    public static let rsaEncryptionOAEPSHA224AESGCM = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:OAEP:SHA224:AESGCM")
    public static let rsaEncryptionOAEPSHA256AESGCM = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:OAEP:SHA256:AESGCM")
    public static let rsaEncryptionOAEPSHA384AESGCM = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:OAEP:SHA384:AESGCM")
    public static let rsaEncryptionOAEPSHA512AESGCM = SecKeyAlgorithm(rawValue: "algid:encrypt:RSA:OAEP:SHA512:AESGCM")
    public static let eciesEncryptionStandardX963SHA1AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDH:KDFX963:SHA1:AESGCM"
    )
    public static let eciesEncryptionStandardX963SHA224AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM"
    )
    public static let eciesEncryptionStandardX963SHA256AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM"
    )
    public static let eciesEncryptionStandardX963SHA384AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM"
    )
    public static let eciesEncryptionStandardX963SHA512AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM"
    )
    public static let eciesEncryptionCofactorX963SHA1AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA1:AESGCM"
    )
    public static let eciesEncryptionCofactorX963SHA224AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM"
    )
    public static let eciesEncryptionCofactorX963SHA256AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM"
    )
    public static let eciesEncryptionCofactorX963SHA384AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM"
    )
    public static let eciesEncryptionCofactorX963SHA512AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM"
    )
    public static let eciesEncryptionStandardVariableIVX963SHA224AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDH:KDFX963:SHA224:AESGCM-KDFIV"
    )
    public static let eciesEncryptionStandardVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV"
    )
    public static let eciesEncryptionStandardVariableIVX963SHA384AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDH:KDFX963:SHA384:AESGCM-KDFIV"
    )
    public static let eciesEncryptionStandardVariableIVX963SHA512AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDH:KDFX963:SHA512:AESGCM-KDFIV"
    )
    public static let eciesEncryptionCofactorVariableIVX963SHA224AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA224:AESGCM-KDFIV"
    )
    public static let eciesEncryptionCofactorVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV"
    )
    public static let eciesEncryptionCofactorVariableIVX963SHA384AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA384:AESGCM-KDFIV"
    )
    public static let eciesEncryptionCofactorVariableIVX963SHA512AESGCM = SecKeyAlgorithm(
        rawValue: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA512:AESGCM-KDFIV"
    )
    public static let ecdhKeyExchangeStandard = SecKeyAlgorithm(rawValue: "algid:keyexchange:ECDH")
    public static let ecdhKeyExchangeStandardX963SHA1 = SecKeyAlgorithm(rawValue: "algid:keyexchange:ECDH:KDFX963:SHA1")
    public static let ecdhKeyExchangeStandardX963SHA224 = SecKeyAlgorithm(
        rawValue: "algid:keyexchange:ECDH:KDFX963:SHA224"
    )
    public static let ecdhKeyExchangeStandardX963SHA256 = SecKeyAlgorithm(
        rawValue: "algid:keyexchange:ECDH:KDFX963:SHA256"
    )
    public static let ecdhKeyExchangeStandardX963SHA384 = SecKeyAlgorithm(
        rawValue: "algid:keyexchange:ECDH:KDFX963:SHA384"
    )
    public static let ecdhKeyExchangeStandardX963SHA512 = SecKeyAlgorithm(
        rawValue: "algid:keyexchange:ECDH:KDFX963:SHA512"
    )
    public static let ecdhKeyExchangeCofactor = SecKeyAlgorithm(rawValue: "algid:keyexchange:ECDHC")
    public static let ecdhKeyExchangeCofactorX963SHA1 = SecKeyAlgorithm(
        rawValue: "algid:keyexchange:ECDHC:KDFX963:SHA1"
    )
    public static let ecdhKeyExchangeCofactorX963SHA224 = SecKeyAlgorithm(
        rawValue: "algid:keyexchange:ECDHC:KDFX963:SHA224"
    )
    public static let ecdhKeyExchangeCofactorX963SHA256 = SecKeyAlgorithm(
        rawValue: "algid:keyexchange:ECDHC:KDFX963:SHA256"
    )
    public static let ecdhKeyExchangeCofactorX963SHA384 = SecKeyAlgorithm(
        rawValue: "algid:keyexchange:ECDHC:KDFX963:SHA384"
    )
    public static let ecdhKeyExchangeCofactorX963SHA512 = SecKeyAlgorithm(
        rawValue: "algid:keyexchange:ECDHC:KDFX963:SHA512"
    )
}

extension SecKeyAlgorithm {
    /// What each algorithm asks for; nil for a string that is none of Apple's.
    var spec: SecKeyAlgorithmSpec? { Self.specs[self] }

    private static let specs: [SecKeyAlgorithm: SecKeyAlgorithmSpec] = [
        .rsaSignatureRaw: .rsaSignature(.digest, nil, .raw),
        .rsaSignatureDigestPKCS1v15Raw: .rsaSignature(.digest, nil, .pkcs1v15),
        .rsaSignatureDigestPKCS1v15SHA1: .rsaSignature(.digest, .sha1, .pkcs1v15),
        .rsaSignatureDigestPKCS1v15SHA224: .rsaSignature(.digest, .sha224, .pkcs1v15),
        .rsaSignatureDigestPKCS1v15SHA256: .rsaSignature(.digest, .sha256, .pkcs1v15),
        .rsaSignatureDigestPKCS1v15SHA384: .rsaSignature(.digest, .sha384, .pkcs1v15),
        .rsaSignatureDigestPKCS1v15SHA512: .rsaSignature(.digest, .sha512, .pkcs1v15),
        .rsaSignatureDigestPSSSHA1: .rsaSignature(.digest, .sha1, .pss),
        .rsaSignatureDigestPSSSHA224: .rsaSignature(.digest, .sha224, .pss),
        .rsaSignatureDigestPSSSHA256: .rsaSignature(.digest, .sha256, .pss),
        .rsaSignatureDigestPSSSHA384: .rsaSignature(.digest, .sha384, .pss),
        .rsaSignatureDigestPSSSHA512: .rsaSignature(.digest, .sha512, .pss),
        .rsaSignatureMessagePKCS1v15SHA1: .rsaSignature(.message, .sha1, .pkcs1v15),
        .rsaSignatureMessagePKCS1v15SHA224: .rsaSignature(.message, .sha224, .pkcs1v15),
        .rsaSignatureMessagePKCS1v15SHA256: .rsaSignature(.message, .sha256, .pkcs1v15),
        .rsaSignatureMessagePKCS1v15SHA384: .rsaSignature(.message, .sha384, .pkcs1v15),
        .rsaSignatureMessagePKCS1v15SHA512: .rsaSignature(.message, .sha512, .pkcs1v15),
        .rsaSignatureMessagePSSSHA1: .rsaSignature(.message, .sha1, .pss),
        .rsaSignatureMessagePSSSHA224: .rsaSignature(.message, .sha224, .pss),
        .rsaSignatureMessagePSSSHA256: .rsaSignature(.message, .sha256, .pss),
        .rsaSignatureMessagePSSSHA384: .rsaSignature(.message, .sha384, .pss),
        .rsaSignatureMessagePSSSHA512: .rsaSignature(.message, .sha512, .pss),
        .ecdsaSignatureRFC4754: .ecdsa(.digest, nil, .rfc4754),
        .ecdsaSignatureDigestX962: .ecdsa(.digest, nil, .x962),
        .ecdsaSignatureDigestRFC4754: .ecdsa(.digest, nil, .rfc4754),
        .ecdsaSignatureDigestX962SHA1: .ecdsa(.digest, .sha1, .x962),
        .ecdsaSignatureDigestX962SHA224: .ecdsa(.digest, .sha224, .x962),
        .ecdsaSignatureDigestX962SHA256: .ecdsa(.digest, .sha256, .x962),
        .ecdsaSignatureDigestX962SHA384: .ecdsa(.digest, .sha384, .x962),
        .ecdsaSignatureDigestX962SHA512: .ecdsa(.digest, .sha512, .x962),
        .ecdsaSignatureMessageX962SHA1: .ecdsa(.message, .sha1, .x962),
        .ecdsaSignatureMessageX962SHA224: .ecdsa(.message, .sha224, .x962),
        .ecdsaSignatureMessageX962SHA256: .ecdsa(.message, .sha256, .x962),
        .ecdsaSignatureMessageX962SHA384: .ecdsa(.message, .sha384, .x962),
        .ecdsaSignatureMessageX962SHA512: .ecdsa(.message, .sha512, .x962),
        .ecdsaSignatureDigestRFC4754SHA1: .ecdsa(.digest, .sha1, .rfc4754),
        .ecdsaSignatureDigestRFC4754SHA224: .ecdsa(.digest, .sha224, .rfc4754),
        .ecdsaSignatureDigestRFC4754SHA256: .ecdsa(.digest, .sha256, .rfc4754),
        .ecdsaSignatureDigestRFC4754SHA384: .ecdsa(.digest, .sha384, .rfc4754),
        .ecdsaSignatureDigestRFC4754SHA512: .ecdsa(.digest, .sha512, .rfc4754),
        .ecdsaSignatureMessageRFC4754SHA1: .ecdsa(.message, .sha1, .rfc4754),
        .ecdsaSignatureMessageRFC4754SHA224: .ecdsa(.message, .sha224, .rfc4754),
        .ecdsaSignatureMessageRFC4754SHA256: .ecdsa(.message, .sha256, .rfc4754),
        .ecdsaSignatureMessageRFC4754SHA384: .ecdsa(.message, .sha384, .rfc4754),
        .ecdsaSignatureMessageRFC4754SHA512: .ecdsa(.message, .sha512, .rfc4754),
        .rsaEncryptionRaw: .rsaEncryption(.raw),
        .rsaEncryptionPKCS1: .rsaEncryption(.pkcs1),
        .rsaEncryptionOAEPSHA1: .rsaEncryption(.oaep(.sha1)),
        .rsaEncryptionOAEPSHA224: .rsaEncryption(.oaep(.sha224)),
        .rsaEncryptionOAEPSHA256: .rsaEncryption(.oaep(.sha256)),
        .rsaEncryptionOAEPSHA384: .rsaEncryption(.oaep(.sha384)),
        .rsaEncryptionOAEPSHA512: .rsaEncryption(.oaep(.sha512)),
        .rsaEncryptionOAEPSHA1AESGCM: .rsaEncryption(.oaepAESGCM(.sha1)),
        .rsaEncryptionOAEPSHA224AESGCM: .rsaEncryption(.oaepAESGCM(.sha224)),
        .rsaEncryptionOAEPSHA256AESGCM: .rsaEncryption(.oaepAESGCM(.sha256)),
        .rsaEncryptionOAEPSHA384AESGCM: .rsaEncryption(.oaepAESGCM(.sha384)),
        .rsaEncryptionOAEPSHA512AESGCM: .rsaEncryption(.oaepAESGCM(.sha512)),
        .eciesEncryptionStandardX963SHA1AESGCM: .ecies(cofactor: false, hash: .sha1, variableIV: false),
        .eciesEncryptionStandardX963SHA224AESGCM: .ecies(cofactor: false, hash: .sha224, variableIV: false),
        .eciesEncryptionStandardX963SHA256AESGCM: .ecies(cofactor: false, hash: .sha256, variableIV: false),
        .eciesEncryptionStandardX963SHA384AESGCM: .ecies(cofactor: false, hash: .sha384, variableIV: false),
        .eciesEncryptionStandardX963SHA512AESGCM: .ecies(cofactor: false, hash: .sha512, variableIV: false),
        .eciesEncryptionCofactorX963SHA1AESGCM: .ecies(cofactor: true, hash: .sha1, variableIV: false),
        .eciesEncryptionCofactorX963SHA224AESGCM: .ecies(cofactor: true, hash: .sha224, variableIV: false),
        .eciesEncryptionCofactorX963SHA256AESGCM: .ecies(cofactor: true, hash: .sha256, variableIV: false),
        .eciesEncryptionCofactorX963SHA384AESGCM: .ecies(cofactor: true, hash: .sha384, variableIV: false),
        .eciesEncryptionCofactorX963SHA512AESGCM: .ecies(cofactor: true, hash: .sha512, variableIV: false),
        .eciesEncryptionStandardVariableIVX963SHA224AESGCM: .ecies(cofactor: false, hash: .sha224, variableIV: true),
        .eciesEncryptionStandardVariableIVX963SHA256AESGCM: .ecies(cofactor: false, hash: .sha256, variableIV: true),
        .eciesEncryptionStandardVariableIVX963SHA384AESGCM: .ecies(cofactor: false, hash: .sha384, variableIV: true),
        .eciesEncryptionStandardVariableIVX963SHA512AESGCM: .ecies(cofactor: false, hash: .sha512, variableIV: true),
        .eciesEncryptionCofactorVariableIVX963SHA224AESGCM: .ecies(cofactor: true, hash: .sha224, variableIV: true),
        .eciesEncryptionCofactorVariableIVX963SHA256AESGCM: .ecies(cofactor: true, hash: .sha256, variableIV: true),
        .eciesEncryptionCofactorVariableIVX963SHA384AESGCM: .ecies(cofactor: true, hash: .sha384, variableIV: true),
        .eciesEncryptionCofactorVariableIVX963SHA512AESGCM: .ecies(cofactor: true, hash: .sha512, variableIV: true),
        .ecdhKeyExchangeStandard: .ecdh(cofactor: false, kdf: nil),
        .ecdhKeyExchangeStandardX963SHA1: .ecdh(cofactor: false, kdf: .sha1),
        .ecdhKeyExchangeStandardX963SHA224: .ecdh(cofactor: false, kdf: .sha224),
        .ecdhKeyExchangeStandardX963SHA256: .ecdh(cofactor: false, kdf: .sha256),
        .ecdhKeyExchangeStandardX963SHA384: .ecdh(cofactor: false, kdf: .sha384),
        .ecdhKeyExchangeStandardX963SHA512: .ecdh(cofactor: false, kdf: .sha512),
        .ecdhKeyExchangeCofactor: .ecdh(cofactor: true, kdf: nil),
        .ecdhKeyExchangeCofactorX963SHA1: .ecdh(cofactor: true, kdf: .sha1),
        .ecdhKeyExchangeCofactorX963SHA224: .ecdh(cofactor: true, kdf: .sha224),
        .ecdhKeyExchangeCofactorX963SHA256: .ecdh(cofactor: true, kdf: .sha256),
        .ecdhKeyExchangeCofactorX963SHA384: .ecdh(cofactor: true, kdf: .sha384),
        .ecdhKeyExchangeCofactorX963SHA512: .ecdh(cofactor: true, kdf: .sha512),
    ]
}
