import CryptoKit
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

/// Secure Enclave keys on a daemon with the TPM root (issue 31, item 5), through the unchanged
/// Apple API: CryptoKit's and `SecKey`'s keys are made, sign and agree inside the TPM (swtpm), with
/// their access control as on the software root. Without the TPM the key signs nothing, while the
/// keychain (which never touches the TPM) still answers: the private key is not in the daemon.
final class SecureEnclaveTPMTests: XCTestCase {
    private var tpm: SwtpmSimulator!

    override func setUpWithError() throws {
        guard SwtpmSimulator.available else { throw XCTSkip("needs swtpm (scripts/setup-debian installs it)") }
        tpm = try SwtpmSimulator()
    }

    override func tearDown() {
        tpm?.destroy()
        tpm = nil
    }

    private func enclave() throws -> TestEnclave {
        var configuration = TestEnclave.Configuration()
        configuration.tpm = tpm.tcti
        return try TestEnclave(configuration)
    }

    private func protected(_ flags: SecAccessControlCreateFlags) -> SecAccessControl {
        SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, flags, nil)!
    }

    func testCryptoKitKeysSignAndAgreeWithTheirAccessControl() throws {
        let enclave = try enclave()
        try enclave.run {
            let key = try SecureEnclave.P256.Signing.PrivateKey(
                accessControl: protected([.privateKeyUsage, .biometryCurrentSet])
            )
            let message = Data("challenge-123".utf8)
            try enclave.queue(.match)
            let signature = try key.signature(for: message)
            XCTAssertTrue(key.publicKey.isValidSignature(signature, for: message))
            let restored = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation)
            XCTAssertEqual(restored.publicKey.rawRepresentation, key.publicKey.rawRepresentation)
            try enclave.queue(.cancel)
            XCTAssertThrowsError(try restored.signature(for: message)) { error in
                XCTAssertEqual((error as? LAError)?.code, .userCancel)
            }
            try enclave.enroll("left-thumb")
            try enclave.queue(.match)
            XCTAssertThrowsError(try key.signature(for: message), "an enrolment change invalidates it") { error in
                guard case .keyInvalidated? = error as? SecureEnclaveKeyError else { return XCTFail("\(error)") }
            }

            let mine = try SecureEnclave.P256.KeyAgreement.PrivateKey(
                accessControl: protected([.privateKeyUsage, .userPresence])
            )
            let peer = P256.KeyAgreement.PrivateKey()
            try enclave.queue(.passcode("1234"))
            let ours = try mine.sharedSecretFromKeyAgreement(with: peer.publicKey)
            let theirs = try peer.sharedSecretFromKeyAgreement(with: mine.publicKey)
            XCTAssertEqual(ours.withUnsafeBytes { Data($0) }, theirs.withUnsafeBytes { Data($0) })
        }
    }

    func testASecKeySignsAndDerivesAsASoftwarePeerDoes() throws {
        let enclave = try enclave()
        try enclave.run {
            var error: Unmanaged<CFError>?
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent as String: true,
                    kSecAttrApplicationTag as String: Data("tpm.key".utf8),
                ] as [String: Any],
            ]
            let key = try XCTUnwrap(
                SecKeyCreateRandomKey(attributes as CFDictionary, &error),
                "\(String(describing: error))"
            )
            let message = Data("to sign".utf8) as CFData
            let signature = try XCTUnwrap(
                SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error)
            )
            XCTAssertTrue(
                SecKeyVerifySignature(
                    SecKeyCopyPublicKey(key)!,
                    .ecdsaSignatureMessageX962SHA256,
                    message,
                    signature,
                    &error
                )
            )
            let peer = try XCTUnwrap(
                SecKeyCreateRandomKey(
                    [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256] as CFDictionary,
                    nil
                )
            )
            let parameters =
                [
                    kSecKeyKeyExchangeParameterRequestedSize: 48,
                    kSecKeyKeyExchangeParameterSharedInfo: Data("info".utf8),
                ] as CFDictionary
            let ours =
                SecKeyCopyKeyExchangeResult(
                    key,
                    .ecdhKeyExchangeStandardX963SHA256,
                    SecKeyCopyPublicKey(peer)!,
                    parameters,
                    &error
                ) as Data?
            let theirs =
                SecKeyCopyKeyExchangeResult(
                    peer,
                    .ecdhKeyExchangeStandardX963SHA256,
                    SecKeyCopyPublicKey(key)!,
                    parameters,
                    &error
                ) as Data?
            XCTAssertEqual(ours?.count, 48)
            XCTAssertEqual(ours, theirs, "the TPM's ECDH and our KDF agree with the software key's")
        }
    }

    /// The TPM gone (stopped), the key signs nothing and says why, while the keychain still
    /// answers; the TPM back after a restart (its saved contexts void), the key signs again.
    func testAKeySignsOnlyWithItsTPM() throws {
        let enclave = try enclave()
        try enclave.run {
            let key = try SecureEnclave.P256.Signing.PrivateKey()
            let message = Data("hello".utf8)
            XCTAssertTrue(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                kSecAttrAccount as String: "acct", kSecValueData as String: Data("secret".utf8),
            ]
            XCTAssertEqual(SecItemAdd(item as CFDictionary, nil), errSecSuccess)

            tpm.stop()
            XCTAssertThrowsError(try key.signature(for: message)) { error in
                guard case .unavailable(let why)? = error as? SecureEnclaveKeyError else {
                    return XCTFail("\(error)")
                }
                XCTAssertTrue(why.contains("TPM"), why)
            }
            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                kSecAttrAccount as String: "acct", kSecReturnData as String: true,
            ]
            XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)

            try tpm.start()
            XCTAssertTrue(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
        }
    }
}
