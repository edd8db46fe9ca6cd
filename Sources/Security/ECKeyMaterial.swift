import Crypto
import Foundation

/// A software elliptic-curve key (P-256, P-384, P-521) as SecKey keeps it: Apple's external
/// representation (X9.63: `04‖X‖Y`, and `‖K` for a private key). Every operation goes to
/// swift-crypto's type for the curve.
struct ECKeyMaterial: Sendable {
    enum Curve: Int, CaseIterable, Sendable {
        case p256 = 256
        case p384 = 384
        case p521 = 521

        var bits: Int { rawValue }
        /// Bytes of one coordinate or of the private scalar.
        var fieldBytes: Int { (bits + 7) / 8 }

        init?(bits: Int) { self.init(rawValue: bits) }

        /// The curve of an X9.63 public (`1 + 2n` bytes) or private (`1 + 3n`) representation.
        /// The class is needed: P-384's public key and P-256's private key are both 97 bytes.
        static func of(x963 count: Int, isPrivate: Bool) -> Curve? {
            allCases.first { count == 1 + (isPrivate ? 3 : 2) * $0.fieldBytes }
        }
    }

    let curve: Curve
    /// X9.63 public key, `04‖X‖Y`.
    let publicX963: Data
    /// The private scalar K, when this is a private key.
    let privateScalar: Data?

    var isPrivate: Bool { privateScalar != nil }
    /// Apple's external representation.
    var externalRepresentation: Data { publicX963 + (privateScalar ?? Data()) }
    var publicKey: ECKeyMaterial { ECKeyMaterial(curve: curve, publicX963: publicX963, privateScalar: nil) }

    static func generate(_ curve: Curve) -> ECKeyMaterial {
        switch curve {
        case .p256:
            let k = P256.Signing.PrivateKey()
            return ECKeyMaterial(
                curve: curve,
                publicX963: k.publicKey.x963Representation,
                privateScalar: k.rawRepresentation
            )
        case .p384:
            let k = P384.Signing.PrivateKey()
            return ECKeyMaterial(
                curve: curve,
                publicX963: k.publicKey.x963Representation,
                privateScalar: k.rawRepresentation
            )
        case .p521:
            let k = P521.Signing.PrivateKey()
            return ECKeyMaterial(
                curve: curve,
                publicX963: k.publicKey.x963Representation,
                privateScalar: k.rawRepresentation
            )
        }
    }

    /// Reads Apple's external representation of a public or private key, checking that the point
    /// is on the curve and that a private scalar matches it.
    init(externalRepresentation data: Data, isPrivate: Bool) throws(SecFailure) {
        guard let curve = Curve.of(x963: data.count, isPrivate: isPrivate), data.first == 0x04 else {
            throw SecFailure(
                errSecDecode,
                "not an X9.63 \(isPrivate ? "private" : "public") EC key of P-256, P-384 or P-521 (\(data.count) bytes)"
            )
        }
        let n = curve.fieldBytes
        let publicPart = Data(data.prefix(1 + 2 * n))
        do {
            if isPrivate {
                let scalar = Data(data.suffix(n))
                let derived: Data
                switch curve {
                case .p256:
                    derived = try P256.Signing.PrivateKey(rawRepresentation: scalar).publicKey.x963Representation
                case .p384:
                    derived = try P384.Signing.PrivateKey(rawRepresentation: scalar).publicKey.x963Representation
                case .p521:
                    derived = try P521.Signing.PrivateKey(rawRepresentation: scalar).publicKey.x963Representation
                }
                guard derived == publicPart else {
                    throw SecFailure(errSecDecode, "the private key does not match its public key")
                }
                self.init(curve: curve, publicX963: publicPart, privateScalar: scalar)
            } else {
                switch curve {
                case .p256: _ = try P256.Signing.PublicKey(x963Representation: publicPart)
                case .p384: _ = try P384.Signing.PublicKey(x963Representation: publicPart)
                case .p521: _ = try P521.Signing.PublicKey(x963Representation: publicPart)
                }
                self.init(curve: curve, publicX963: publicPart, privateScalar: nil)
            }
        } catch let e as SecFailure {
            throw e
        } catch {
            throw SecFailure(errSecDecode, "not a valid \(curve.bits)-bit EC key: \(error)")
        }
    }

    init(curve: Curve, publicX963: Data, privateScalar: Data?) {
        self.curve = curve
        self.publicX963 = publicX963
        self.privateScalar = privateScalar
    }

    /// ECDSA over `digest` (any length: the curve's rule takes its leftmost bits). Answers the
    /// DER (X9.62) and raw (r‖s, RFC 4754) encodings.
    func sign(digest: Data) throws(SecFailure) -> (der: Data, raw: Data) {
        guard let scalar = privateScalar else { throw SecFailure(errSecParam, "a public key cannot sign") }
        let d = GivenDigest(digest)
        do {
            switch curve {
            case .p256:
                let s = try P256.Signing.PrivateKey(rawRepresentation: scalar).signature(for: d)
                return (s.derRepresentation, s.rawRepresentation)
            case .p384:
                let s = try P384.Signing.PrivateKey(rawRepresentation: scalar).signature(for: d)
                return (s.derRepresentation, s.rawRepresentation)
            case .p521:
                let s = try P521.Signing.PrivateKey(rawRepresentation: scalar).signature(for: d)
                return (s.derRepresentation, s.rawRepresentation)
            }
        } catch {
            throw SecFailure(errSecInternalComponent, "ECDSA signing failed: \(error)")
        }
    }

    /// Whether `signature` (DER or raw, as `format` says) is this key's ECDSA signature of `digest`.
    func isValid(signature: Data, format: SecKeyAlgorithmSpec.ECDSAFormat, digest: Data) -> Bool {
        let d = GivenDigest(digest)
        switch curve {
        case .p256:
            guard let key = try? P256.Signing.PublicKey(x963Representation: publicX963),
                let s = try?
                    (format == .x962
                    ? P256.Signing.ECDSASignature(derRepresentation: signature)
                    : P256.Signing.ECDSASignature(rawRepresentation: signature))
            else { return false }
            return key.isValidSignature(s, for: d)
        case .p384:
            guard let key = try? P384.Signing.PublicKey(x963Representation: publicX963),
                let s = try?
                    (format == .x962
                    ? P384.Signing.ECDSASignature(derRepresentation: signature)
                    : P384.Signing.ECDSASignature(rawRepresentation: signature))
            else { return false }
            return key.isValidSignature(s, for: d)
        case .p521:
            guard let key = try? P521.Signing.PublicKey(x963Representation: publicX963),
                let s = try?
                    (format == .x962
                    ? P521.Signing.ECDSASignature(derRepresentation: signature)
                    : P521.Signing.ECDSASignature(rawRepresentation: signature))
            else { return false }
            return key.isValidSignature(s, for: d)
        }
    }

    /// ECDH with `peer` (an X9.63 public key on the same curve).
    func sharedSecret(with peer: Data) throws(SecFailure) -> SharedSecret {
        guard let scalar = privateScalar else { throw SecFailure(errSecParam, "a public key cannot do key exchange") }
        do {
            switch curve {
            case .p256:
                return try P256.KeyAgreement.PrivateKey(rawRepresentation: scalar).sharedSecretFromKeyAgreement(
                    with: .init(x963Representation: peer)
                )
            case .p384:
                return try P384.KeyAgreement.PrivateKey(rawRepresentation: scalar).sharedSecretFromKeyAgreement(
                    with: .init(x963Representation: peer)
                )
            case .p521:
                return try P521.KeyAgreement.PrivateKey(rawRepresentation: scalar).sharedSecretFromKeyAgreement(
                    with: .init(x963Representation: peer)
                )
            }
        } catch {
            throw SecFailure(errSecParam, "the other key is not a \(curve.bits)-bit EC public key")
        }
    }
}

/// A digest the caller made (the `…Digest…` algorithms) or we made with the algorithm's hash,
/// handed to swift-crypto's ECDSA as it is.
struct GivenDigest: Digest {
    static let byteCount = 64
    let bytes: [UInt8]
    init(_ data: Data) { bytes = Array(data) }
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }
    func makeIterator() -> Array<UInt8>.Iterator { bytes.makeIterator() }
    var description: String { "digest of \(bytes.count) bytes" }
}
