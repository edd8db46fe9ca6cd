import Crypto
import Foundation
import _CryptoExtras

/// TPM2_MakeCredential done where there is no TPM (TPM 2.0 Part 1, "Credential Protection"): a
/// secret wrapped for one TPM's endorsement key and bound to the name of one attestation key.
/// Only the TPM that holds that endorsement key, with that attestation key loaded, gets the
/// secret back (TPM2_ActivateCredential) — the proof a server asks before it certifies the
/// attestation key as this TPM's. ECC endorsement keys only (the TCG's L-2 and H-3 templates):
/// an RSA one needs OAEP with a label, which swift-crypto does not offer.
public enum TPMCredential {
    public struct Wrapped: Sendable, Equatable {
        /// TPM2B_ID_OBJECT, marshalled.
        public let credentialBlob: [UInt8]
        /// TPM2B_ENCRYPTED_SECRET, marshalled: the ephemeral point.
        public let encryptedSecret: [UInt8]
    }

    /// Wraps `credential` (at most the EK name algorithm's digest size) for `endorsementKey`, bound
    /// to `objectName` (the attestation key's name).
    public static func make(
        _ credential: [UInt8],
        endorsementKey: TPMPublicArea,
        objectName: [UInt8]
    ) throws -> Wrapped {
        let hash = endorsementKey.nameAlgorithm
        guard let symmetricBits = endorsementKey.symmetricKeyBits, [128, 256].contains(symmetricBits) else {
            throw TPMWireError.unsupported("an endorsement key without AES-CFB")
        }
        guard !credential.isEmpty, credential.count <= hash.digestSize else {
            throw TPMWireError.unsupported("a credential of \(credential.count) bytes")
        }
        let (z, ephemeral) = try agree(with: endorsementKey)
        let size = endorsementKey.curve.coordinateSize
        let ephemeralX = Array(ephemeral.dropFirst().prefix(size))
        let ephemeralY = Array(ephemeral.dropFirst(1 + size))
        let seed = kdfE(
            hash,
            z: z,
            label: "IDENTITY",
            partyU: ephemeralX,
            partyV: endorsementKey.x,
            bits: hash.digestSize * 8
        )
        let symmetricKey = kdfA(
            hash,
            key: seed,
            label: "STORAGE",
            contextU: objectName,
            contextV: [],
            bits: symmetricBits
        )
        var plain = TPMWriter()
        plain.sized(credential)
        let encrypted = try AES._CFB.encrypt(
            plain.bytes,
            using: SymmetricKey(data: symmetricKey),
            iv: AES._CFB.IV(ivBytes: [UInt8](repeating: 0, count: 16))
        )
        let hmacKey = kdfA(hash, key: seed, label: "INTEGRITY", contextU: [], contextV: [], bits: hash.digestSize * 8)
        let integrity = hash.hmac(key: hmacKey, Array(encrypted) + objectName)
        var idObject = TPMWriter()
        idObject.uint16(UInt16(2 + integrity.count + encrypted.count))
        idObject.sized(integrity)
        idObject.raw(encrypted)
        var point = TPMWriter()
        point.sized(ephemeralX)
        point.sized(ephemeralY)
        var secret = TPMWriter()
        secret.sized(point.bytes)
        return Wrapped(credentialBlob: idObject.bytes, encryptedSecret: secret.bytes)
    }

    /// ECDH with a fresh key on the endorsement key's curve: the shared x coordinate and the fresh
    /// public point (X9.63).
    private static func agree(with key: TPMPublicArea) throws -> (z: [UInt8], ephemeral: [UInt8]) {
        switch key.curve {
        case .p256:
            let peer = try P256.KeyAgreement.PublicKey(x963Representation: key.x963)
            let mine = P256.KeyAgreement.PrivateKey()
            let z = try mine.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Array($0) }
            return (z, Array(mine.publicKey.x963Representation))
        case .p384:
            let peer = try P384.KeyAgreement.PublicKey(x963Representation: key.x963)
            let mine = P384.KeyAgreement.PrivateKey()
            let z = try mine.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Array($0) }
            return (z, Array(mine.publicKey.x963Representation))
        }
    }

    /// KDFa (Part 1, 11.4.10.2): SP 800-108's counter mode with the TPM's HMAC.
    static func kdfA(
        _ hash: TPMHash,
        key: [UInt8],
        label: String,
        contextU: [UInt8],
        contextV: [UInt8],
        bits: Int
    )
        -> [UInt8]
    {
        counterMode(bits: bits) { counter in
            var message = TPMWriter()
            message.uint32(counter)
            message.raw(Array(label.utf8) + [0])
            message.raw(contextU)
            message.raw(contextV)
            message.uint32(UInt32(bits))
            return hash.hmac(key: key, message.bytes)
        }
    }

    /// KDFe (Part 1, 11.4.10.3): SP 800-56A's one-step KDF with the TPM's hash.
    static func kdfE(
        _ hash: TPMHash,
        z: [UInt8],
        label: String,
        partyU: [UInt8],
        partyV: [UInt8],
        bits: Int
    )
        -> [UInt8]
    {
        counterMode(bits: bits) { counter in
            var message = TPMWriter()
            message.uint32(counter)
            message.raw(z)
            message.raw(Array(label.utf8) + [0])
            message.raw(partyU)
            message.raw(partyV)
            return hash.digest(message.bytes)
        }
    }

    /// Blocks for counters 1, 2, … until `bits` are there (whole bytes: every size here is).
    private static func counterMode(bits: Int, _ block: (UInt32) -> [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var counter: UInt32 = 0
        while out.count * 8 < bits {
            counter += 1
            out += block(counter)
        }
        return Array(out.prefix(bits / 8))
    }
}
