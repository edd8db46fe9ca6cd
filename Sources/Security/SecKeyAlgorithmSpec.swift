import Crypto
import EnclaveProtocol
import Foundation

/// What a `SecKeyAlgorithm` asks for, read once from the table beside each constant
/// (SecKeyAlgorithm.swift): the operation, its input form, hash, padding or key derivation.
/// The key types decide from this whether they can run it; nothing else reads the strings.
enum SecKeyAlgorithmSpec: Hashable, Sendable {
    enum Hash: Hashable, Sendable { case sha1, sha224, sha256, sha384, sha512 }
    /// What the caller hands over: the message (we hash it) or its digest (already hashed).
    enum Input: Hashable, Sendable { case message, digest }
    /// ECDSA signature encodings: DER `ECDSA-Sig-Value` (X9.62) or raw r‖s (RFC 4754).
    enum ECDSAFormat: Hashable, Sendable { case x962, rfc4754 }
    enum RSASignaturePadding: Hashable, Sendable { case raw, pkcs1v15, pss }
    enum RSAEncryptionPadding: Hashable, Sendable {
        case raw, pkcs1
        case oaep(Hash)
        case oaepAESGCM(Hash)
    }

    /// `hash` nil: the digest is signed as given, whatever its length.
    case ecdsa(Input, Hash?, ECDSAFormat)
    /// `hash` nil with `.digest`: PKCS#1 v1.5 over a caller-made DigestInfo ("Raw").
    case rsaSignature(Input, Hash?, RSASignaturePadding)
    case rsaEncryption(RSAEncryptionPadding)
    /// ECDH; `kdf` nil answers the raw shared secret.
    case ecdh(cofactor: Bool, kdf: Hash?)
    /// ECIES as Apple's: an ephemeral key's ECDH, X9.63 KDF, AES-GCM.
    case ecies(cofactor: Bool, hash: Hash, variableIV: Bool)

    var operation: SecKeyOperationType {
        switch self {
        case .ecdsa, .rsaSignature: return .sign
        case .rsaEncryption, .ecies: return .encrypt
        case .ecdh: return .keyExchange
        }
    }
}

extension SecKeyAlgorithmSpec.Hash {
    /// Output bytes.
    var byteCount: Int {
        switch self {
        case .sha1: return 20
        case .sha224: return 28
        case .sha256: return 32
        case .sha384: return 48
        case .sha512: return 64
        }
    }

    /// swift-crypto has no SHA-224: the algorithms built on it are not offered (the table says so).
    var isAvailable: Bool { self != .sha224 }

    func digest(of message: Data) throws(SecFailure) -> Data {
        switch self {
        case .sha1: return Data(Insecure.SHA1.hash(data: message))
        case .sha224: throw SecFailure(errSecUnimplemented, "SHA-224 is not available on Linux (swift-crypto has none)")
        case .sha256: return Data(SHA256.hash(data: message))
        case .sha384: return Data(SHA384.hash(data: message))
        case .sha512: return Data(SHA512.hash(data: message))
        }
    }

    /// ANSI X9.63 key derivation from an ECDH secret (swift-crypto's).
    func x963(_ secret: SharedSecret, sharedInfo: Data, byteCount: Int) throws(SecFailure) -> Data {
        let key: SymmetricKey
        switch self {
        case .sha1:
            key = secret.x963DerivedSymmetricKey(
                using: Insecure.SHA1.self,
                sharedInfo: sharedInfo,
                outputByteCount: byteCount
            )
        case .sha224: throw SecFailure(errSecUnimplemented, "SHA-224 is not available on Linux (swift-crypto has none)")
        case .sha256:
            key = secret.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: sharedInfo, outputByteCount: byteCount)
        case .sha384:
            key = secret.x963DerivedSymmetricKey(using: SHA384.self, sharedInfo: sharedInfo, outputByteCount: byteCount)
        case .sha512:
            key = secret.x963DerivedSymmetricKey(using: SHA512.self, sharedInfo: sharedInfo, outputByteCount: byteCount)
        }
        return key.withUnsafeBytes { Data($0) }
    }
}

extension SecKeyAlgorithmSpec {
    /// Whether the algorithm needs a hash swift-crypto lacks.
    var needsMissingHash: Bool {
        switch self {
        case .ecdsa(_, let h, _), .rsaSignature(_, let h, _): return h.map { !$0.isAvailable } ?? false
        case .rsaEncryption(.oaep(let h)), .rsaEncryption(.oaepAESGCM(let h)): return !h.isAvailable
        case .rsaEncryption: return false
        case .ecdh(_, let h): return h.map { !$0.isAvailable } ?? false
        case .ecies(_, let h, _): return !h.isAvailable
        }
    }
}

extension SecKeyAlgorithmSpec.Hash {
    /// The hash as the daemon's key derivation names it.
    var wire: KeyDerivation.Hash {
        get throws(SecFailure) {
            switch self {
            case .sha1: return .sha1
            case .sha224: throw SecFailure(errSecUnimplemented, "SHA-224 is not available on Linux")
            case .sha256: return .sha256
            case .sha384: return .sha384
            case .sha512: return .sha512
            }
        }
    }
}
