import EnclaveClient
import EnclaveProtocol
import Foundation

// Apple's SecKey functions (SecKey.h), with Apple's Swift signatures. A failure answers nil (or
// false) and, when `error` is given, a CFError in `NSOSStatusErrorDomain` whose code is the
// OSStatus (errSecParam for a wrong call or an algorithm the key cannot run, errSecUnimplemented
// for what Linux lacks, errSecVerifyFailed for a signature that does not verify…) and whose
// description says why.

/// Apple's `SecKeyOperationType` (CFIndex values of SecKey.h).
public enum SecKeyOperationType: Int, Sendable {
    case sign = 0
    case verify = 1
    case encrypt = 2
    case decrypt = 3
    case keyExchange = 4

    /// Signing, decrypting and key exchange use a private key; verifying and encrypting a public one.
    var needsPrivateKey: Bool { self == .sign || self == .decrypt || self == .keyExchange }

    var name: String {
        switch self {
        case .sign: return "signing"
        case .verify: return "verification"
        case .encrypt: return "encryption"
        case .decrypt: return "decryption"
        case .keyExchange: return "key exchange"
        }
    }
}

/// Makes a key pair and answers its private key (Apple's `SecKeyCreateRandomKey`).
///
/// `parameters`: `kSecAttrKeyType` (`kSecAttrKeyTypeECSECPrimeRandom` or `kSecAttrKeyTypeRSA`),
/// `kSecAttrKeySizeInBits` (EC: 256, 384, 521; RSA: 1024–4096 in steps of 8 — our defaults when
/// absent: 256 and 2048), `kSecAttrTokenID` = `kSecAttrTokenIDSecureEnclave` for a P-256 key in
/// laenclaved, and in `kSecPrivateKeyAttrs` (or at the top level) `kSecAttrIsPermanent`,
/// `kSecAttrApplicationTag`, `kSecAttrLabel`, `kSecAttrAccessGroup`, `kSecAttrAccessControl`;
/// `kSecUseAuthenticationContext` is the context a Secure Enclave key's uses authenticate on.
///
/// Our choices: a permanent key is stored as one private-key item (Apple also stores the public
/// key of a software pair); a software key's access control guards its item (the prompt comes
/// when it is read back), a Secure Enclave key's is checked at each use; `kSecPublicKeyAttrs` and
/// the capability attributes (`kSecAttrCanSign`…) are accepted and not stored.
public func SecKeyCreateRandomKey(
    _ parameters: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecKey? {
    secKeyCall(error) { () throws(SecFailure) -> SecKey in try SecKeyGeneration.create(parameters) }
}

/// The public key of `key` (Apple's `SecKeyCopyPublicKey`); for a public key, the key itself.
public func SecKeyCopyPublicKey(_ key: SecKey) -> SecKey? { key.publicKey }

public func SecKeyCreateSignature(
    _ key: SecKey,
    _ algorithm: SecKeyAlgorithm,
    _ dataToSign: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(SecFailure) -> CFData in NSData(data: try key.sign(dataToSign as Data, algorithm)) }
}

/// A signature that does not verify answers false with `errSecVerifyFailed`, as Apple's does.
public func SecKeyVerifySignature(
    _ key: SecKey,
    _ algorithm: SecKeyAlgorithm,
    _ signedData: CFData,
    _ signature: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> Bool {
    secKeyCall(error) { () throws(SecFailure) -> Bool in
        guard try key.verify(signedData as Data, signature: signature as Data, algorithm) else {
            throw SecFailure(errSecVerifyFailed, "\(algorithm.rawValue): the signature does not verify")
        }
        return true
    } ?? false
}

public func SecKeyCreateEncryptedData(
    _ key: SecKey,
    _ algorithm: SecKeyAlgorithm,
    _ plaintext: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(SecFailure) -> CFData in NSData(data: try key.encrypt(plaintext as Data, algorithm)) }
}

public func SecKeyCreateDecryptedData(
    _ key: SecKey,
    _ algorithm: SecKeyAlgorithm,
    _ ciphertext: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(SecFailure) -> CFData in NSData(data: try key.decrypt(ciphertext as Data, algorithm))
    }
}

/// ECDH (Apple's `SecKeyCopyKeyExchangeResult`). `parameters`: with an X9.63 algorithm,
/// `kSecKeyKeyExchangeParameterRequestedSize` (bytes, required) and optionally
/// `kSecKeyKeyExchangeParameterSharedInfo`.
public func SecKeyCopyKeyExchangeResult(
    _ privateKey: SecKey,
    _ algorithm: SecKeyAlgorithm,
    _ publicKey: SecKey,
    _ parameters: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(SecFailure) -> CFData in
        let p = try SecKeyParameters(parameters)
        let size = try p.int(kSecKeyKeyExchangeParameterRequestedSize as String)
        let info = try p.data(kSecKeyKeyExchangeParameterSharedInfo as String) ?? Data()
        return NSData(data: try privateKey.exchange(with: publicKey, algorithm, requestedSize: size, sharedInfo: info))
    }
}

/// Apple's external representation: EC `04‖X‖Y` (`‖K` for a private key), RSA PKCS#1 DER.
/// A Secure Enclave private key has none (`errSecUnimplemented`, as the key cannot leave the enclave).
public func SecKeyCopyExternalRepresentation(
    _ key: SecKey,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    secKeyCall(error) { () throws(SecFailure) -> CFData in
        if case .enclave = key.material {
            throw SecFailure(errSecUnimplemented, "a Secure Enclave private key cannot be exported")
        }
        return NSData(data: key.itemData)
    }
}

/// A key from its external representation (Apple's `SecKeyCreateWithData`); `attributes` needs
/// `kSecAttrKeyType` and `kSecAttrKeyClass` (public or private); `kSecAttrKeySizeInBits`, when
/// given, must agree with the data.
public func SecKeyCreateWithData(
    _ keyData: CFData,
    _ attributes: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecKey? {
    secKeyCall(error) { () throws(SecFailure) -> SecKey in
        let p = try SecKeyParameters(attributes)
        guard let type = try p.string("type") else { throw SecFailure(errSecParam, "kSecAttrKeyType is missing") }
        guard let keyClass = try p.string("kcls") else { throw SecFailure(errSecParam, "kSecAttrKeyClass is missing") }
        let key = try SecKey(data: keyData as Data, type: type, keyClass: keyClass)
        if let bits = try p.int("bsiz"), bits != key.sizeInBits {
            throw SecFailure(errSecParam, "kSecAttrKeySizeInBits is \(bits) but the key has \(key.sizeInBits) bits")
        }
        return key
    }
}

/// The key's attributes (Apple's `SecKeyCopyAttributes`): class, type, size, application label,
/// its item's attributes when it came from the keychain, the capability flags, and for a key that
/// can be exported, its external representation as `kSecValueData`.
public func SecKeyCopyAttributes(_ key: SecKey) -> CFDictionary? {
    let out = NSMutableDictionary()
    for (k, v) in key.itemAttributes { out[NSString(string: k)] = SecItemMarshaling.object(v) }
    for (k, v) in key.keyAttributes where k != "class" { out[NSString(string: k)] = SecItemMarshaling.object(v) }
    out[NSString(string: "esiz")] = NSNumber(value: key.sizeInBits)
    if out["perm"] == nil { out[NSString(string: "perm")] = NSNumber(value: false) }
    let can: [(String, SecKeyOperationType)] = [
        ("sign", .sign), ("vrfy", .verify), ("encr", .encrypt), ("decr", .decrypt), ("drve", .keyExchange),
    ]
    for (attribute, operation) in can {
        let usable = operation.needsPrivateKey == key.isPrivate && (operation != .keyExchange || !key.isRSA)
        out[NSString(string: attribute)] = NSNumber(value: usable)
    }
    out[NSString(string: "wrap")] = NSNumber(value: false)
    out[NSString(string: "unwp")] = NSNumber(value: false)
    if case .enclave = key.material {} else { out[NSString(string: "v_Data")] = NSData(data: key.itemData) }
    return out.copy() as? NSDictionary
}

public func SecKeyIsAlgorithmSupported(
    _ key: SecKey,
    _ operation: SecKeyOperationType,
    _ algorithm: SecKeyAlgorithm
) -> Bool {
    key.refusal(operation, algorithm) == nil
}

/// Apple's `SecKeyGetBlockSize`: RSA, the modulus in bytes. Our choice for EC keys (Apple's value
/// is not documented): the longest DER signature of the curve.
public func SecKeyGetBlockSize(_ key: SecKey) -> Int {
    if key.isRSA { return (key.sizeInBits + 7) / 8 }
    let n = (key.sizeInBits + 7) / 8
    // SEQUENCE { INTEGER r, INTEGER s }, each integer at most n + 1 bytes.
    let body = 2 * (2 + n + 1)
    return body + (body > 127 ? 3 : 2)
}

// MARK: Parameter dictionaries

/// A SecKey call's dictionary, read with the keychain's value rules (SecItemMarshaling).
struct SecKeyParameters {
    let entries: [String: Any]

    init(_ dict: CFDictionary) throws(SecFailure) {
        entries = try SecItemMarshaling.entries(dict)
    }

    init(entries: [String: Any]) { self.entries = entries }

    func string(_ key: String) throws(SecFailure) -> String? {
        guard let v = entries[key] else { return nil }
        guard let s = v as? String else { throw SecFailure(errSecParam, "\(key) must be a string") }
        return s
    }

    func int(_ key: String) throws(SecFailure) -> Int? {
        guard let v = entries[key] else { return nil }
        if let s = v as? String, let i = Int(s) { return i }
        guard case .int(let i)? = SecItemMarshaling.value(v), let n = Int(exactly: i) else {
            throw SecFailure(errSecParam, "\(key) must be a number")
        }
        return n
    }

    func bool(_ key: String) throws(SecFailure) -> Bool? {
        guard let v = entries[key] else { return nil }
        return try SecItemMarshaling.bool(v, key)
    }

    func data(_ key: String) throws(SecFailure) -> Data? {
        guard let v = entries[key] else { return nil }
        if let d = v as? Data { return d }
        if let s = v as? String { return Data(s.utf8) }
        throw SecFailure(errSecParam, "\(key) must be data")
    }

    func dictionary(_ key: String) throws(SecFailure) -> SecKeyParameters? {
        guard let v = entries[key] else { return nil }
        if let d = v as? [String: Any] { return SecKeyParameters(entries: d) }
        guard let d = v as? NSDictionary else { throw SecFailure(errSecParam, "\(key) must be a dictionary") }
        return try SecKeyParameters(d)
    }
}

/// Apple's `SecKeyKeyExchangeParameter` (a typed CFString): the keys of
/// `SecKeyCopyKeyExchangeResult`'s parameters, as Swift code names them.
public struct SecKeyKeyExchangeParameter: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(rawValue: CFString) { self.rawValue = rawValue as String }

    public static let requestedSize = SecKeyKeyExchangeParameter(rawValue: "requestedSize")
    public static let sharedInfo = SecKeyKeyExchangeParameter(rawValue: "sharedInfo")
}
