import Crypto
import EnclaveProtocol
import Foundation
import _CryptoExtras

/// Apple's ECIES framing (Security's SecKeyAdaptors): the ephemeral public key, then AES-GCM's
/// ciphertext and 16-byte tag. The X9.63 KDF (shared info: the ephemeral public key) yields a
/// 16-byte AES key for curves up to 256 bits and 32 bytes above, followed, in the variable-IV
/// algorithms, by a 16-byte IV; the others use 16 zero bytes as IV.
enum ECIES {
    static let ivBytes = 16

    static func derivedBytes(_ curve: ECKeyMaterial.Curve, _ variableIV: Bool) -> Int {
        (curve.bits > 256 ? 32 : 16) + (variableIV ? ivBytes : 0)
    }

    private static func split(_ keyAndIV: Data, _ variableIV: Bool) throws(SecFailure) -> (SymmetricKey, AES.GCM.Nonce)
    {
        let keyBytes = variableIV ? keyAndIV.count - ivBytes : keyAndIV.count
        let iv = variableIV ? Data(keyAndIV.suffix(ivBytes)) : Data(count: ivBytes)
        do {
            return (SymmetricKey(data: keyAndIV.prefix(keyBytes)), try AES.GCM.Nonce(data: iv))
        } catch {
            throw SecFailure(errSecInternalComponent, "ECIES: bad IV: \(error)")
        }
    }

    static func seal(_ plaintext: Data, keyAndIV: Data, variableIV: Bool) throws(SecFailure) -> Data {
        let (key, nonce) = try split(keyAndIV, variableIV)
        do {
            let box = try AES.GCM.seal(plaintext, using: key, nonce: nonce)
            return box.ciphertext + box.tag
        } catch {
            throw SecFailure(errSecParam, "ECIES: failed to AES-GCM encrypt data")
        }
    }

    static func open(_ body: Data, keyAndIV: Data, variableIV: Bool) throws(SecFailure) -> Data {
        let (key, nonce) = try split(keyAndIV, variableIV)
        do {
            let box = try AES.GCM.SealedBox(nonce: nonce, ciphertext: body.dropLast(16), tag: body.suffix(16))
            return try AES.GCM.open(box, using: key)
        } catch {
            throw SecFailure(errSecParam, "ECIES: failed to AES-GCM decrypt data")
        }
    }
}
