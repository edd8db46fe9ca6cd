import Crypto
import EnclaveProtocol
import Foundation
import _CryptoExtras

/// The AES-GCM half of Apple's RSA-OAEP key wrapping: 16 zero bytes of IV, the RSA public key's
/// PKCS#1 form as associated data, the 16-byte tag last.
enum RSAKeyWrap {
    static func seal(_ plaintext: Data, key: SymmetricKey, publicKey: Data) throws(SecFailure) -> Data {
        do {
            let box = try AES.GCM.seal(
                plaintext,
                using: key,
                nonce: try AES.GCM.Nonce(data: Data(count: 16)),
                authenticating: publicKey
            )
            return box.ciphertext + box.tag
        } catch {
            throw SecFailure(errSecParam, "RSAWRAP: failed to AES-GCM encrypt data")
        }
    }

    static func open(_ body: Data, key: SymmetricKey, publicKey: Data) throws(SecFailure) -> Data {
        do {
            let box = try AES.GCM.SealedBox(
                nonce: try AES.GCM.Nonce(data: Data(count: 16)),
                ciphertext: body.dropLast(16),
                tag: body.suffix(16)
            )
            return try AES.GCM.open(box, using: key, authenticating: publicKey)
        } catch {
            throw SecFailure(errSecParam, "RSA-WRAP: failed to AES-GCM decrypt data")
        }
    }
}
