import Crypto
import EnclaveProtocol
import Foundation
import _CryptoExtras

/// What each key can run, and running it. The algorithm's meaning comes from its spec
/// (SecKeyAlgorithmSpec); the math from swift-crypto, or laenclaved for Secure Enclave keys.
extension SecKey {
    /// Why `operation` with `algorithm` cannot run on this key, or nil when it can.
    func refusal(_ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm) -> SecFailure? {
        guard let spec = algorithm.spec else {
            return SecFailure(errSecParam, "\(algorithm.rawValue) is not a SecKeyAlgorithm")
        }
        let base: SecKeyOperationType = (operation == .verify) ? .sign : (operation == .decrypt) ? .encrypt : operation
        guard spec.operation == base else {
            return SecFailure(errSecParam, "\(algorithm.rawValue) is not a \(operation.name) algorithm")
        }
        guard operation.needsPrivateKey == isPrivate else {
            return SecFailure(
                errSecParam,
                "\(operation.name) needs a \(operation.needsPrivateKey ? "private" : "public") key; this is \(self)"
            )
        }
        let notHere = SecFailure(errSecParam, "\(algorithm.rawValue) is not supported by \(self)")
        if spec.needsMissingHash {
            return SecFailure(
                errSecUnimplemented,
                "\(algorithm.rawValue) needs SHA-224, which is not available on Linux"
            )
        }
        switch spec {
        case .ecdsa, .ecdh, .ecies:
            if case .enclave(let k) = material, k.kind == .signing, operation != .sign {
                return SecFailure(errSecParam, "\(algorithm.rawValue): this Secure Enclave key only signs")
            }
            return isRSA ? notHere : nil
        case .rsaSignature(let input, let hash, let padding):
            guard isRSA else { return notHere }
            // swift-crypto signs only digests it made itself, and has no raw RSA.
            if input == .digest || hash == nil || padding == .raw {
                return SecFailure(
                    errSecUnimplemented,
                    "\(algorithm.rawValue) is not available on Linux (swift-crypto has no RSA over a caller's digest, nor raw RSA); use the message form"
                )
            }
            return nil
        case .rsaEncryption(let padding):
            guard isRSA else { return notHere }
            switch padding {
            case .pkcs1, .oaep(.sha1), .oaep(.sha256), .oaepAESGCM(.sha1), .oaepAESGCM(.sha256): return nil
            default:
                return SecFailure(
                    errSecUnimplemented,
                    "\(algorithm.rawValue) is not available on Linux (swift-crypto offers RSA PKCS#1 v1.5, and OAEP with SHA-1 or SHA-256 only)"
                )
            }
        }
    }

    private func checked(
        _ operation: SecKeyOperationType,
        _ algorithm: SecKeyAlgorithm
    ) throws(SecFailure) -> SecKeyAlgorithmSpec {
        if let refusal = refusal(operation, algorithm) { throw refusal }
        return algorithm.spec!
    }

    // MARK: Signatures

    func sign(_ data: Data, _ algorithm: SecKeyAlgorithm) throws(SecFailure) -> Data {
        switch try checked(.sign, algorithm) {
        case .ecdsa(let input, let hash, let format):
            let digest = try Self.digest(data, input, hash, algorithm)
            switch material {
            case .ec(let k):
                let s = try k.sign(digest: digest)
                return format == .x962 ? s.der : s.raw
            case .enclave(let k):
                let reply = try k.run(
                    KeyRequest(operation: .sign, kind: .general, digest: Self.p256Digest(digest), context: "")
                )
                guard let der = reply.signatureDER, let raw = reply.signature else {
                    throw SecFailure(errSecInternalComponent, "the enclave answered no signature")
                }
                return format == .x962 ? der : raw
            default: throw SecFailure(errSecParam, "not an EC key")
            }
        case .rsaSignature(_, let hash?, let padding):
            guard case .rsaPrivate(let k) = material else { throw SecFailure(errSecParam, "not an RSA private key") }
            do {
                let p: _RSA.Signing.Padding = padding == .pss ? .PSS : .insecurePKCS1v1_5
                switch hash {
                case .sha1: return try k.signature(for: Insecure.SHA1.hash(data: data), padding: p).rawRepresentation
                case .sha256: return try k.signature(for: SHA256.hash(data: data), padding: p).rawRepresentation
                case .sha384: return try k.signature(for: SHA384.hash(data: data), padding: p).rawRepresentation
                case .sha512: return try k.signature(for: SHA512.hash(data: data), padding: p).rawRepresentation
                case .sha224: throw SecFailure(errSecUnimplemented, "SHA-224 is not available on Linux")
                }
            } catch let e as SecFailure {
                throw e
            } catch {
                throw SecFailure(errSecParam, "RSA signing failed: \(error)")
            }
        default:
            throw SecFailure(errSecParam, "\(algorithm.rawValue) does not sign")
        }
    }

    /// Whether `signature` is valid; throws only when the call itself is wrong.
    func verify(_ data: Data, signature: Data, _ algorithm: SecKeyAlgorithm) throws(SecFailure) -> Bool {
        switch try checked(.verify, algorithm) {
        case .ecdsa(let input, let hash, let format):
            guard case .ec(let k) = material else { throw SecFailure(errSecParam, "not an EC public key") }
            return k.isValid(
                signature: signature,
                format: format,
                digest: try Self.digest(data, input, hash, algorithm)
            )
        case .rsaSignature(_, let hash?, let padding):
            guard case .rsaPublic(let k) = material else { throw SecFailure(errSecParam, "not an RSA public key") }
            let s = _RSA.Signing.RSASignature(rawRepresentation: signature)
            let p: _RSA.Signing.Padding = padding == .pss ? .PSS : .insecurePKCS1v1_5
            switch hash {
            case .sha1: return k.isValidSignature(s, for: Insecure.SHA1.hash(data: data), padding: p)
            case .sha256: return k.isValidSignature(s, for: SHA256.hash(data: data), padding: p)
            case .sha384: return k.isValidSignature(s, for: SHA384.hash(data: data), padding: p)
            case .sha512: return k.isValidSignature(s, for: SHA512.hash(data: data), padding: p)
            case .sha224: throw SecFailure(errSecUnimplemented, "SHA-224 is not available on Linux")
            }
        default:
            throw SecFailure(errSecParam, "\(algorithm.rawValue) does not verify")
        }
    }

    /// The digest an ECDSA algorithm signs: the caller's (checked against the algorithm's hash
    /// size, as Apple checks it) or the message's.
    private static func digest(
        _ data: Data,
        _ input: SecKeyAlgorithmSpec.Input,
        _ hash: SecKeyAlgorithmSpec.Hash?,
        _ algorithm: SecKeyAlgorithm
    ) throws(SecFailure) -> Data {
        guard let hash else { return data }
        if input == .message { return try hash.digest(of: data) }
        guard data.count == hash.byteCount else {
            throw SecFailure(
                errSecParam,
                "bad digest size for signing with algorithm \(algorithm.rawValue): \(data.count) bytes, not \(hash.byteCount)"
            )
        }
        return data
    }

    /// A digest as P-256 ECDSA reads it, in the 32 bytes the enclave takes: a longer one's leftmost
    /// 256 bits, a shorter one's value unchanged (zeros in front). The same signature either way.
    static func p256Digest(_ digest: Data) -> Data {
        digest.count >= 32 ? Data(digest.prefix(32)) : Data(repeating: 0, count: 32 - digest.count) + digest
    }

    // MARK: Encryption

    func encrypt(_ plaintext: Data, _ algorithm: SecKeyAlgorithm) throws(SecFailure) -> Data {
        switch try checked(.encrypt, algorithm) {
        case .ecies(_, let hash, let variableIV):
            guard case .ec(let recipient) = material else { throw SecFailure(errSecParam, "not an EC public key") }
            let ephemeral = ECKeyMaterial.generate(recipient.curve)
            let secret = try ephemeral.sharedSecret(with: recipient.publicX963)
            let keyAndIV = try hash.x963(
                secret,
                sharedInfo: ephemeral.publicX963,
                byteCount: ECIES.derivedBytes(recipient.curve, variableIV)
            )
            return ephemeral.publicX963 + (try ECIES.seal(plaintext, keyAndIV: keyAndIV, variableIV: variableIV))
        case .rsaEncryption(let padding):
            guard case .rsaPublic(let k) = material else { throw SecFailure(errSecParam, "not an RSA public key") }
            do {
                let key = try _RSA.Encryption.PublicKey(unsafeDERRepresentation: k.derRepresentation)
                if case .oaepAESGCM(let hash) = padding {
                    // Apple's RSA key wrapping: a fresh AES key wrapped with OAEP, then AES-GCM with the
                    // public key as associated data (Security's SecKeyAdaptors).
                    let session = SymmetricKey(size: k.keySizeInBits >= 4096 ? .bits256 : .bits128)
                    let wrapped = try key.encrypt(
                        session.withUnsafeBytes { Data($0) },
                        padding: Self.rsaPadding(.oaep(hash))
                    )
                    return wrapped + (try RSAKeyWrap.seal(plaintext, key: session, publicKey: k.pkcs1DERRepresentation))
                }
                return try key.encrypt(plaintext, padding: Self.rsaPadding(padding))
            } catch let e as SecFailure {
                throw e
            } catch {
                throw SecFailure(
                    errSecParam,
                    "RSA encryption failed (is the plaintext too long for the key?): \(error)"
                )
            }
        default:
            throw SecFailure(errSecParam, "\(algorithm.rawValue) does not encrypt")
        }
    }

    func decrypt(_ ciphertext: Data, _ algorithm: SecKeyAlgorithm) throws(SecFailure) -> Data {
        switch try checked(.decrypt, algorithm) {
        case .ecies(_, let hash, let variableIV):
            let curve: ECKeyMaterial.Curve
            switch material {
            case .ec(let k): curve = k.curve
            case .enclave: curve = .p256
            default: throw SecFailure(errSecParam, "not an EC private key")
            }
            let pointBytes = 1 + 2 * curve.fieldBytes
            guard ciphertext.count >= pointBytes + 16 else {
                throw SecFailure(errSecParam, "ECIES: input data too short")
            }
            let ephemeral = Data(ciphertext.prefix(pointBytes))
            let count = ECIES.derivedBytes(curve, variableIV)
            let keyAndIV: Data
            switch material {
            case .ec(let k):
                keyAndIV = try hash.x963(try k.sharedSecret(with: ephemeral), sharedInfo: ephemeral, byteCount: count)
            case .enclave(let k):
                let derivation = KeyDerivation(hash: try hash.wire, sharedInfo: ephemeral, byteCount: count)
                let reply = try k.run(
                    KeyRequest(
                        operation: .agree,
                        kind: .general,
                        peerPublicKey: ephemeral,
                        derivation: derivation,
                        context: ""
                    )
                )
                guard let derived = reply.derivedKey else {
                    throw SecFailure(errSecInternalComponent, "the enclave answered no derived key")
                }
                keyAndIV = derived
            default: throw SecFailure(errSecParam, "not an EC private key")
            }
            return try ECIES.open(Data(ciphertext.dropFirst(pointBytes)), keyAndIV: keyAndIV, variableIV: variableIV)
        case .rsaEncryption(let padding):
            guard case .rsaPrivate(let k) = material else { throw SecFailure(errSecParam, "not an RSA private key") }
            do {
                let key = try _RSA.Encryption.PrivateKey(unsafeDERRepresentation: k.derRepresentation)
                if case .oaepAESGCM(let hash) = padding {
                    let blockBytes = (k.keySizeInBits + 7) / 8
                    guard ciphertext.count >= blockBytes + 16 else {
                        throw SecFailure(errSecParam, "RSA-WRAP too short input data")
                    }
                    let session = try key.decrypt(ciphertext.prefix(blockBytes), padding: Self.rsaPadding(.oaep(hash)))
                    guard session.count == (k.keySizeInBits >= 4096 ? 32 : 16) else {
                        throw SecFailure(errSecParam, "RSA-WRAP bad ciphertext, unexpected session key size")
                    }
                    return try RSAKeyWrap.open(
                        Data(ciphertext.dropFirst(blockBytes)),
                        key: SymmetricKey(data: session),
                        publicKey: k.publicKey.pkcs1DERRepresentation
                    )
                }
                return try key.decrypt(ciphertext, padding: Self.rsaPadding(padding))
            } catch let e as SecFailure {
                throw e
            } catch {
                throw SecFailure(errSecDecode, "RSA decryption failed")
            }
        default:
            throw SecFailure(errSecParam, "\(algorithm.rawValue) does not decrypt")
        }
    }

    private static func rsaPadding(
        _ p: SecKeyAlgorithmSpec.RSAEncryptionPadding
    ) throws(SecFailure) -> _RSA.Encryption.Padding {
        switch p {
        case .pkcs1: return ._WEAK_AND_INSECURE_PKCS_V1_5
        case .oaep(.sha1): return .PKCS1_OAEP
        case .oaep(.sha256): return .PKCS1_OAEP_SHA256
        default: throw SecFailure(errSecUnimplemented, "this RSA padding is not available on Linux")
        }
    }

    // MARK: Key exchange

    /// ECDH with `peer`; with a KDF, `requestedSize` bytes derived with `sharedInfo`.
    func exchange(
        with peer: SecKey,
        _ algorithm: SecKeyAlgorithm,
        requestedSize: Int?,
        sharedInfo: Data
    ) throws(SecFailure) -> Data {
        guard case .ecdh(_, let kdf) = try checked(.keyExchange, algorithm) else {
            throw SecFailure(errSecParam, "\(algorithm.rawValue) is not a key exchange")
        }
        guard case .ec(let other) = peer.material, !other.isPrivate else {
            throw SecFailure(errSecParam, "the other key must be an EC public key")
        }
        var size = 0
        if kdf != nil {
            guard sharedInfo.count <= 4096 else {
                throw SecFailure(errSecParam, "kSecKeyKeyExchangeParameterSharedInfo may have at most 4096 bytes")
            }
            guard let requestedSize, requestedSize > 0, requestedSize <= 1 << 16 else {
                throw SecFailure(
                    errSecParam,
                    "kSecKeyKeyExchangeParameterRequestedSize must be a positive byte count (at most 65536) for \(algorithm.rawValue)"
                )
            }
            size = requestedSize
        }
        switch material {
        case .ec(let k):
            guard other.curve == k.curve else { throw SecFailure(errSecParam, "the keys are on different curves") }
            let secret = try k.sharedSecret(with: other.publicX963)
            guard let kdf else { return secret.withUnsafeBytes { Data($0) } }
            return try kdf.x963(secret, sharedInfo: sharedInfo, byteCount: size)
        case .enclave(let k):
            guard other.curve == .p256 else {
                throw SecFailure(errSecParam, "a Secure Enclave key exchanges only with P-256 keys")
            }
            var derivation: KeyDerivation?
            if let kdf { derivation = KeyDerivation(hash: try kdf.wire, sharedInfo: sharedInfo, byteCount: size) }
            let reply = try k.run(
                KeyRequest(
                    operation: .agree,
                    kind: .general,
                    peerPublicKey: other.publicX963,
                    derivation: derivation,
                    context: ""
                )
            )
            guard let out = derivation == nil ? reply.sharedSecret : reply.derivedKey else {
                throw SecFailure(errSecInternalComponent, "the enclave answered no secret")
            }
            return out
        default:
            throw SecFailure(errSecParam, "not an EC private key")
        }
    }
}
