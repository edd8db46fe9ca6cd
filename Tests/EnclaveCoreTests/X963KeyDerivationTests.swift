import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

/// Our X9.63 KDF against swift-crypto's own, for every hash and for lengths around the block
/// boundaries, so a secret the TPM computed derives exactly what a software key's would.
final class X963KeyDerivationTests: XCTestCase {
    func testItDerivesWhatSwiftCryptoDerives() throws {
        let mine = P256.KeyAgreement.PrivateKey()
        let peer = P256.KeyAgreement.PrivateKey()
        let secret = try mine.sharedSecretFromKeyAgreement(with: peer.publicKey)
        let raw = secret.withUnsafeBytes { Data($0) }
        let infos = [Data(), Data("shared info".utf8), Data(repeating: 7, count: 300)]
        for info in infos {
            for count in [1, 16, 20, 32, 33, 48, 64, 65, 100, 1000] {
                let cases: [(KeyDerivation.Hash, SymmetricKey)] = [
                    (
                        .sha1,
                        secret.x963DerivedSymmetricKey(
                            using: Insecure.SHA1.self,
                            sharedInfo: info,
                            outputByteCount: count
                        )
                    ),
                    (
                        .sha256,
                        secret.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: info, outputByteCount: count)
                    ),
                    (
                        .sha384,
                        secret.x963DerivedSymmetricKey(using: SHA384.self, sharedInfo: info, outputByteCount: count)
                    ),
                    (
                        .sha512,
                        secret.x963DerivedSymmetricKey(using: SHA512.self, sharedInfo: info, outputByteCount: count)
                    ),
                ]
                for (hash, expected) in cases {
                    let derived = X963KeyDerivation.derive(
                        KeyDerivation(hash: hash, sharedInfo: info, byteCount: count),
                        sharedSecret: raw
                    )
                    XCTAssertEqual(derived, expected.withUnsafeBytes { Data($0) }, "\(hash) \(count) \(info.count)")
                }
            }
        }
    }
}
