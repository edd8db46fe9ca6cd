import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

/// SecKey through the real daemon: Secure Enclave keys made, stored, found and used with Apple's
/// functions (each use asks the person, as the key's access control says), and software keys as
/// keychain items.
final class SecKeyTests: XCTestCase {
    private func enclaveKey(
        tag: String,
        _ flags: SecAccessControlCreateFlags,
        context: LAContext? = nil
    ) throws -> SecKey {
        let access = SecAccessControlCreateWithFlags(
            kCFAllocatorDefault,
            kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
            flags,
            nil
        )!
        var attributes: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeySizeInBits as String: 256,
            kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
            kSecPrivateKeyAttrs as String: [
                kSecAttrIsPermanent as String: true,
                kSecAttrApplicationTag as String: Data(tag.utf8),
                kSecAttrAccessControl as String: access,
            ] as [String: Any],
        ]
        if let context { attributes[kSecUseAuthenticationContext as String] = context }
        var error: Unmanaged<CFError>?
        guard let key = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
            throw error!.takeRetainedValue() as Error
        }
        return key
    }

    private func find(tag: String) -> (OSStatus, SecKey?) {
        let query: [String: Any] = [
            kSecClass as String: kSecClassKey,
            kSecAttrApplicationTag as String: Data(tag.utf8),
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecReturnRef as String: true,
        ]
        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        return (status, item as? SecKey)
    }

    private func prompted(_ enclave: TestEnclave) throws -> Int {
        guard case .audit(let entries) = try enclave.send(.audit(.init(limit: 100, everyApp: false))) else { return -1 }
        return entries.filter { $0.result == "success(biometric)" }.count
    }

    /// Apple's recipe ("Protecting keys with the Secure Enclave"): make, find by tag, sign, verify,
    /// encrypt to the public key and decrypt with the enclave's. Each private-key use takes a touch.
    func testTheSecureEnclaveRecipeEndToEnd() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let made = try enclaveKey(tag: "com.example.keys.mykey", [.privateKeyUsage, .biometryCurrentSet])
            var error: Unmanaged<CFError>?
            XCTAssertNil(SecKeyCopyExternalRepresentation(made, &error), "the private key never leaves the enclave")
            XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecUnimplemented))
            let attributes = SecKeyCopyAttributes(made) as? [String: Any]
            XCTAssertEqual(attributes?[kSecAttrTokenID as String] as? String, kSecAttrTokenIDSecureEnclave as String)

            let (status, found) = find(tag: "com.example.keys.mykey")
            XCTAssertEqual(status, errSecSuccess)
            let key = try XCTUnwrap(found)
            let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
            XCTAssertEqual(
                SecKeyCopyExternalRepresentation(publicKey, nil) as Data?,
                SecKeyCopyExternalRepresentation(SecKeyCopyPublicKey(made)!, nil) as Data?
            )
            XCTAssertTrue(SecKeyIsAlgorithmSupported(key, .sign, .ecdsaSignatureMessageX962SHA256))
            XCTAssertTrue(SecKeyIsAlgorithmSupported(key, .decrypt, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM))

            let message = Data("transfer 10 EUR".utf8)
            try enclave.queue(.match)
            let signature = try XCTUnwrap(
                SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, &error),
                "\(error.map { $0.takeRetainedValue() } as Any)"
            )
            XCTAssertTrue(
                SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, signature, &error)
            )
            XCTAssertEqual(try prompted(enclave), 1)

            let secret = Data("for your eyes only".utf8)
            let ciphertext = try XCTUnwrap(
                SecKeyCreateEncryptedData(
                    publicKey,
                    .eciesEncryptionCofactorVariableIVX963SHA256AESGCM,
                    secret as CFData,
                    &error
                )
            )
            try enclave.queue(.match)
            XCTAssertEqual(
                SecKeyCreateDecryptedData(key, .eciesEncryptionCofactorVariableIVX963SHA256AESGCM, ciphertext, &error)
                    as Data?,
                secret
            )
            XCTAssertEqual(try prompted(enclave), 2)

            // A cancelled prompt is the caller's error, and nothing is signed.
            try enclave.queue(.cancel)
            XCTAssertNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, &error))
            XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecUserCanceled))

            XCTAssertEqual(
                SecItemDelete(
                    [kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("com.example.keys.mykey".utf8)]
                        as CFDictionary
                ),
                errSecSuccess
            )
            XCTAssertEqual(find(tag: "com.example.keys.mykey").0, errSecItemNotFound)
        }
    }

    /// A context that has authorized once serves the key's next uses without another prompt, and
    /// the key found with that context uses it.
    func testAContextAuthorizesTheKeyOnce() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 10
            let key = try enclaveKey(tag: "reuse", [.privateKeyUsage, .biometryAny], context: context)
            let peer = try XCTUnwrap(
                SecKeyCreateRandomKey(
                    [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256] as CFDictionary,
                    nil
                )
            )
            try enclave.queue(.match)
            var error: Unmanaged<CFError>?
            let params = [kSecKeyKeyExchangeParameterRequestedSize: 32] as CFDictionary
            let ours =
                SecKeyCopyKeyExchangeResult(
                    key,
                    .ecdhKeyExchangeStandardX963SHA256,
                    SecKeyCopyPublicKey(peer)!,
                    params,
                    &error
                ) as Data?
            let theirs =
                SecKeyCopyKeyExchangeResult(
                    peer,
                    .ecdhKeyExchangeStandardX963SHA256,
                    SecKeyCopyPublicKey(key)!,
                    params,
                    &error
                ) as Data?
            XCTAssertEqual(ours?.count, 32)
            XCTAssertEqual(ours, theirs, "the enclave's ECDH and KDF agree with the software key's")
            let raw =
                SecKeyCopyKeyExchangeResult(
                    key,
                    .ecdhKeyExchangeStandard,
                    SecKeyCopyPublicKey(peer)!,
                    [:] as CFDictionary,
                    &error
                ) as Data?
            XCTAssertEqual(
                raw,
                SecKeyCopyKeyExchangeResult(
                    peer,
                    .ecdhKeyExchangeStandard,
                    SecKeyCopyPublicKey(key)!,
                    [:] as CFDictionary,
                    nil
                ) as Data?
            )
            XCTAssertEqual(try prompted(enclave), 1, "the second use rode on the context's authorization")
        }
    }

    /// Software keys as key items: added with kSecValueRef, found with kSecReturnRef (also beside
    /// their attributes), deleted with kSecValueRef; a duplicate is refused.
    func testSoftwareKeysAsKeychainItems() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            var error: Unmanaged<CFError>?
            let rsa = try XCTUnwrap(
                SecKeyCreateRandomKey(
                    [
                        kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 2048,
                        kSecPrivateKeyAttrs: [
                            kSecAttrIsPermanent: true, kSecAttrApplicationTag: Data("rsa".utf8),
                            kSecAttrLabel: "Signing key",
                        ] as [String: Any],
                    ] as CFDictionary,
                    &error
                )
            )
            var item: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("rsa".utf8), kSecReturnRef: true,
                        kSecReturnAttributes: true,
                    ] as CFDictionary,
                    &item
                ),
                errSecSuccess
            )
            let found = try XCTUnwrap(item as? [String: Any])
            XCTAssertEqual(found[kSecAttrLabel as String] as? String, "Signing key")
            XCTAssertEqual(found[kSecAttrKeyType as String] as? String, kSecAttrKeyTypeRSA as String)
            let key = try XCTUnwrap(found[kSecValueRef as String].map { $0 as! SecKey })
            XCTAssertEqual(
                SecKeyCopyExternalRepresentation(key, nil) as Data?,
                SecKeyCopyExternalRepresentation(rsa, nil) as Data?
            )

            let ec = try XCTUnwrap(
                SecKeyCreateRandomKey(
                    [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 384] as CFDictionary,
                    nil
                )
            )
            let add: [String: Any] = [kSecValueRef as String: ec, kSecAttrApplicationTag as String: Data("ec".utf8)]
            XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecSuccess)
            XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecDuplicateItem)
            XCTAssertEqual(
                SecItemCopyMatching(
                    [kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("ec".utf8), kSecReturnRef: true]
                        as CFDictionary,
                    &item
                ),
                errSecSuccess
            )
            XCTAssertEqual(
                SecKeyCopyExternalRepresentation(item as! SecKey, nil) as Data?,
                SecKeyCopyExternalRepresentation(ec, nil) as Data?
            )
            // A persistent reference finds the key item again, as a reference.
            var persistent: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("ec".utf8), kSecReturnPersistentRef: true]
                        as CFDictionary,
                    &persistent
                ),
                errSecSuccess
            )
            let reference = try XCTUnwrap(persistent as? Data)
            XCTAssertEqual(
                SecItemCopyMatching(
                    [kSecClass: kSecClassKey, kSecValuePersistentRef: reference, kSecReturnRef: true] as CFDictionary,
                    &item
                ),
                errSecSuccess
            )
            XCTAssertEqual(
                SecKeyCopyExternalRepresentation(item as! SecKey, nil) as Data?,
                SecKeyCopyExternalRepresentation(ec, nil) as Data?
            )
            XCTAssertEqual(SecItemDelete([kSecClass: kSecClassKey, kSecValueRef: ec] as CFDictionary), errSecSuccess)
            XCTAssertEqual(
                SecItemCopyMatching(
                    [kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("ec".utf8)] as CFDictionary,
                    nil
                ),
                errSecItemNotFound
            )
            // A password item has no reference object: kSecReturnRef beside other return keys adds nothing.
            XCTAssertEqual(
                SecItemAdd(
                    [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", kSecValueData: Data("p".utf8)]
                        as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", kSecReturnRef: true,
                        kSecReturnData: true,
                        kSecReturnAttributes: true,
                    ] as CFDictionary,
                    &item
                ),
                errSecSuccess
            )
            let password = try XCTUnwrap(item as? [String: Any])
            XCTAssertEqual(password[kSecValueData as String] as? Data, Data("p".utf8))
            XCTAssertNil(password[kSecValueRef as String])
        }
    }
}
