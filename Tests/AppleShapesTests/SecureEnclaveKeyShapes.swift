import Foundation
import Security

// App code in the shapes of Apple's article "Protecting keys with the Secure Enclave" and of
// SecKey's documentation, written as an iOS app writes it: NSDictionary literals with CF keys,
// Unmanaged<CFError> out-parameters, `as! SecKey` on a keychain result. It must compile unchanged.

enum ShapeError: Error {
    case underlying(Error)
    case status(OSStatus)
    case unsupported
}

func makeAndStoreKey(name: String, requiresBiometry: Bool = false) throws -> SecKey {
    let flags: SecAccessControlCreateFlags =
        requiresBiometry ? [.privateKeyUsage, .biometryCurrentSet] : .privateKeyUsage
    let access = SecAccessControlCreateWithFlags(
        kCFAllocatorDefault,
        kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
        flags,
        nil
    )!
    let tag = name.data(using: .utf8)!
    let attributes: NSDictionary = [
        kSecAttrKeyType: kSecAttrKeyTypeEC,
        kSecAttrKeySizeInBits: 256,
        kSecAttrTokenID: kSecAttrTokenIDSecureEnclave,
        kSecPrivateKeyAttrs: [
            kSecAttrIsPermanent: true,
            kSecAttrApplicationTag: tag,
            kSecAttrAccessControl: access,
        ] as NSDictionary,
    ]
    var error: Unmanaged<CFError>?
    guard let privateKey = SecKeyCreateRandomKey(attributes, &error) else {
        throw ShapeError.underlying(error!.takeRetainedValue() as Error)
    }
    return privateKey
}

func loadKey(name: String) -> SecKey? {
    let tag = name.data(using: .utf8)!
    let query: [String: Any] = [
        kSecClass as String: kSecClassKey,
        kSecAttrApplicationTag as String: tag,
        kSecAttrKeyType as String: kSecAttrKeyTypeEC,
        kSecReturnRef as String: true,
    ]
    var item: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &item)
    guard status == errSecSuccess else { return nil }
    return (item as! SecKey)
}

func removeKey(name: String) -> OSStatus {
    let query: [String: Any] = [
        kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: name.data(using: .utf8)!,
    ]
    return SecItemDelete(query as CFDictionary)
}

func sign(_ message: String, with privateKey: SecKey) throws -> Data {
    let algorithm: SecKeyAlgorithm = .ecdsaSignatureMessageX962SHA256
    guard SecKeyIsAlgorithmSupported(privateKey, .sign, algorithm) else { throw ShapeError.unsupported }
    var error: Unmanaged<CFError>?
    guard
        let signature = SecKeyCreateSignature(privateKey, algorithm, message.data(using: .utf8)! as CFData, &error)
            as Data?
    else {
        throw error!.takeRetainedValue() as Error
    }
    return signature
}

func verify(_ message: String, signature: Data, with privateKey: SecKey) -> Bool {
    guard let publicKey = SecKeyCopyPublicKey(privateKey) else { return false }
    var error: Unmanaged<CFError>?
    return SecKeyVerifySignature(
        publicKey,
        .ecdsaSignatureMessageX962SHA256,
        message.data(using: .utf8)! as CFData,
        signature as CFData,
        &error
    )
}

func encrypt(_ text: String, for privateKey: SecKey) throws -> Data {
    let publicKey = SecKeyCopyPublicKey(privateKey)!
    let algorithm: SecKeyAlgorithm = .eciesEncryptionCofactorVariableIVX963SHA256AESGCM
    guard SecKeyIsAlgorithmSupported(publicKey, .encrypt, algorithm) else { throw ShapeError.unsupported }
    var error: Unmanaged<CFError>?
    guard
        let cipherText = SecKeyCreateEncryptedData(publicKey, algorithm, text.data(using: .utf8)! as CFData, &error)
            as Data?
    else {
        throw error!.takeRetainedValue() as Error
    }
    return cipherText
}

func decrypt(_ cipherText: Data, with privateKey: SecKey) throws -> String {
    let algorithm: SecKeyAlgorithm = .eciesEncryptionCofactorVariableIVX963SHA256AESGCM
    guard SecKeyIsAlgorithmSupported(privateKey, .decrypt, algorithm) else { throw ShapeError.unsupported }
    var error: Unmanaged<CFError>?
    guard let clearText = SecKeyCreateDecryptedData(privateKey, algorithm, cipherText as CFData, &error) as Data? else {
        throw error!.takeRetainedValue() as Error
    }
    return String(decoding: clearText, as: UTF8.self)
}

/// A public key sent to a server: Apple's external representation, and back.
func exportPublicKey(of privateKey: SecKey) throws -> Data {
    var error: Unmanaged<CFError>?
    guard let data = SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(privateKey)!, &error) else {
        throw error!.takeRetainedValue() as Error
    }
    return data as Data
}

func importPublicKey(_ data: Data) -> SecKey? {
    let options: [String: Any] = [
        kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
        kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
        kSecAttrKeySizeInBits as String: 256,
    ]
    return SecKeyCreateWithData(data as CFData, options as CFDictionary, nil)
}

/// How wrappers read a CFError they get back.
func describe(_ error: Error) -> (domain: String, code: Int) {
    let cf = error as CFError
    return (CFErrorGetDomain(cf) as String, CFErrorGetCode(cf))
}
