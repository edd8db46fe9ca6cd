import Foundation

/// Security's `SecKeyAlgorithm` (a CFString in Apple's SDK), with Apple's string values. Defined
/// here because LocalAuthentication's rights API takes it; the Security module re-exports it.
public struct SecKeyAlgorithm: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let ecdsaSignatureMessageX962SHA256 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:message-X962:SHA256")
    public static let ecdsaSignatureDigestX962SHA256 = SecKeyAlgorithm(rawValue: "algid:sign:ECDSA:digest-X962:SHA256")
    public static let eciesEncryptionStandardVariableIVX963SHA256AESGCM = SecKeyAlgorithm(rawValue: "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV")
    public static let eciesEncryptionCofactorVariableIVX963SHA256AESGCM = SecKeyAlgorithm(rawValue: "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV")
    public static let ecdhKeyExchangeCofactorX963SHA256 = SecKeyAlgorithm(rawValue: "algid:keyexchange:ECDHC:KDFX963:SHA256")
    public static let ecdhKeyExchangeStandardX963SHA256 = SecKeyAlgorithm(rawValue: "algid:keyexchange:ECDH:KDFX963:SHA256")
    public static let ecdhKeyExchangeStandard = SecKeyAlgorithm(rawValue: "algid:keyexchange:ECDH")
    public static let ecdhKeyExchangeCofactor = SecKeyAlgorithm(rawValue: "algid:keyexchange:ECDHC")
}
