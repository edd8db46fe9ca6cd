import CryptoKit
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

/// A deleted Secure Enclave key is dead everywhere: a copy of its `dataRepresentation` (or a key
/// object still holding it) kept from before the deletion signs nothing afterwards, and says why.
final class KeyRevocationAttackTests: XCTestCase {
    func testACopyOfADeletedKeyItemsKeySignsNothing() throws {
        let enclave = try TestEnclave()
        try enclave.run {
            let access = SecAccessControlCreateWithFlags(
                kCFAllocatorDefault,
                kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                .privateKeyUsage,
                nil
            )!
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: Data("revoked".utf8),
                    kSecAttrAccessControl as String: access,
                ] as [String: Any],
            ]
            var error: Unmanaged<CFError>?
            let kept = try XCTUnwrap(SecKeyCreateRandomKey(attributes as CFDictionary, &error))
            let message = Data("before".utf8) as CFData
            XCTAssertNotNil(
                SecKeyCreateSignature(kept, .ecdsaSignatureMessageX962SHA256, message, &error),
                "the live key signs"
            )

            XCTAssertEqual(
                SecItemDelete([kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("revoked".utf8)] as CFDictionary),
                errSecSuccess
            )

            XCTAssertNil(
                SecKeyCreateSignature(kept, .ecdsaSignatureMessageX962SHA256, message, &error),
                "the deleted key still signed"
            )
            let failure = try XCTUnwrap(error?.takeRetainedValue())
            XCTAssertEqual(CFErrorGetCode(failure), Int(errSecInvalidKeyRef))
            XCTAssertTrue("\(failure)".contains("deleted"), "\(failure)")
        }
    }

    func testAPersistedRightsKeyDiesWithTheRight() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            let store = LARightStore.shared
            try await store.removeAllRights()
            _ = try await store.saveRight(LARight(), identifier: "door")
            let kept = try await store.right(forIdentifier: "door")
            try await store.removeRight(forIdentifier: "door")

            try enclave.queue(.match)
            try await kept.authorize(localizedReason: "Open the door")
            do {
                _ = try await kept.key.sign(Data("m".utf8), algorithm: .ecdsaSignatureMessageX962SHA256)
                XCTFail("the removed right's key still signed")
            } catch {
                XCTAssertTrue("\(error)".contains("deleted"), "\(error)")
            }
        }
    }

    /// A CryptoKit key's `dataRepresentation` kept in a file outlives nothing the daemon destroyed:
    /// removing the passcode destroys a `…WhenPasscodeSet…` key's own key, and every copy says so.
    func testAWhenPasscodeSetKeyDiesWithThePasscode() throws {
        let enclave = try TestEnclave()
        let blob = try enclave.run { () throws -> Data in
            let access = SecAccessControlCreateWithFlags(
                kCFAllocatorDefault,
                kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
                .privateKeyUsage,
                nil
            )!
            return try SecureEnclave.P256.Signing.PrivateKey(accessControl: access).dataRepresentation
        }
        try enclave.removePasscode(current: "1234")
        try enclave.setPasscode("1234")
        try enclave.run {
            XCTAssertThrowsError(
                try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: blob).signature(for: Data("m".utf8))
            ) { error in
                guard case .keyInvalidated(let why)? = error as? SecureEnclaveKeyError else {
                    return XCTFail("\(error)")
                }
                XCTAssertTrue(why.contains("passcode was removed"), why)
            }
        }
    }
}
