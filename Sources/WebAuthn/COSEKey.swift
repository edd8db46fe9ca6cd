import Crypto
import Foundation
import _CryptoExtras

/// A credential public key in COSE form (RFC 9052/9053): ES256 (an EC2 key on P-256, ECDSA over
/// SHA-256, what every WebAuthn authenticator supports and laenclaved makes), EdDSA (an OKP
/// Ed25519 key) and RS256 (an RSA key of at least 2048 bits, RSASSA-PKCS1-v1_5 over SHA-256), the
/// three algorithms browsers offer by default. Any other is refused as unsupported.
public struct COSEKey: Equatable, Sendable {
    /// COSE labels and values this module understands (RFC 9053, RFC 8230, IANA COSE registries).
    enum Label {
        static let keyType = 1
        static let algorithm = 3
        /// EC2 and OKP: the curve; RSA: the modulus n.
        static let curve = -1
        /// EC2 and OKP: x; RSA: the public exponent e.
        static let x = -2
        static let y = -3
    }
    static let keyTypeOKP = 1
    static let keyTypeEC2 = 2
    static let keyTypeRSA = 3
    static let curveP256 = 1
    static let curveEd25519 = 6

    /// The COSE algorithms accepted, with their IANA values.
    public enum Algorithm: Int, Sendable, CaseIterable {
        case es256 = -7
        case edDSA = -8
        case rs256 = -257
    }

    enum Material: Sendable {
        case p256(P256.Signing.PublicKey)
        case ed25519(Curve25519.Signing.PublicKey)
        /// With the modulus and exponent as the key arrived, for its encoding.
        case rsa(_RSA.Signing.PublicKey, n: Data, e: Data)
    }

    let material: Material

    public var algorithm: Algorithm {
        switch material {
        case .p256: .es256
        case .ed25519: .edDSA
        case .rsa: .rs256
        }
    }

    public init(_ key: P256.Signing.PublicKey) { material = .p256(key) }
    public init(_ key: Curve25519.Signing.PublicKey) { material = .ed25519(key) }
    public init(_ key: _RSA.Signing.PublicKey) throws {
        let primitives = try key.getKeyPrimitives()
        material = .rsa(key, n: primitives.modulus, e: primitives.publicExponent)
    }

    /// The P-256 key of an ES256 credential (laenclaved's keys are).
    public var p256: P256.Signing.PublicKey? {
        if case .p256(let k) = material { return k }
        return nil
    }

    /// Parses a COSE_Key. Another key type, algorithm or curve is `unsupportedAlgorithm`; a key
    /// that claims a supported algorithm but is not well-formed (or an RSA key under 2048 bits) is
    /// `malformedPublicKey`. Extra parameters (such as `kid`) are ignored, as COSE allows.
    public init(cbor: Data) throws {
        let item: CBOR
        do {
            item = try CBOR.decode(cbor)
        } catch let error as WebAuthnError {
            throw WebAuthnError(.malformedPublicKey, "credential public key is not valid CBOR: \(error.message)")
        }
        guard case .map = item else {
            throw WebAuthnError(.malformedPublicKey, "credential public key is not a CBOR map")
        }
        let keyType = try Self.integer(item[Label.keyType], name: "key type (kty)")
        let algorithmValue = try Self.integer(item[Label.algorithm], name: "algorithm (alg)")
        guard let algorithm = Algorithm(rawValue: algorithmValue) else {
            throw Self.unsupported("algorithm (alg) is \(algorithmValue)")
        }
        switch algorithm {
        case .es256:
            try Self.require(keyType, equals: Self.keyTypeEC2, name: "key type (kty) of an ES256 key")
            try Self.require(
                try Self.integer(item[Label.curve], name: "curve (crv)"),
                equals: Self.curveP256,
                name: "curve (crv) of an ES256 key"
            )
            // ES256 keys must use the uncompressed form: y as bytes, never the compressed sign bit.
            guard let x = item[Label.x]?.bytesValue, x.count == 32, let y = item[Label.y]?.bytesValue, y.count == 32
            else {
                throw WebAuthnError(
                    .malformedPublicKey,
                    "EC2 key needs 32-byte x and y coordinates (uncompressed form)"
                )
            }
            do { material = .p256(try P256.Signing.PublicKey(rawRepresentation: x + y)) } catch {
                throw WebAuthnError(.malformedPublicKey, "x and y are not a point on P-256")
            }
        case .edDSA:
            try Self.require(keyType, equals: Self.keyTypeOKP, name: "key type (kty) of an EdDSA key")
            try Self.require(
                try Self.integer(item[Label.curve], name: "curve (crv)"),
                equals: Self.curveEd25519,
                name: "curve (crv) of an EdDSA key"
            )
            guard let x = item[Label.x]?.bytesValue, x.count == 32 else {
                throw WebAuthnError(.malformedPublicKey, "an Ed25519 key needs a 32-byte x")
            }
            do { material = .ed25519(try Curve25519.Signing.PublicKey(rawRepresentation: x)) } catch {
                throw WebAuthnError(.malformedPublicKey, "x is not an Ed25519 public key")
            }
        case .rs256:
            try Self.require(keyType, equals: Self.keyTypeRSA, name: "key type (kty) of an RS256 key")
            guard let n = item[Label.curve]?.bytesValue, let e = item[Label.x]?.bytesValue, !n.isEmpty, !e.isEmpty,
                e.count <= 8
            else {
                throw WebAuthnError(
                    .malformedPublicKey,
                    "an RSA key needs its modulus n (-1) and exponent e (-2) as byte strings"
                )
            }
            // Bounded before it reaches BoringSSL: 2048 to 8192 bits.
            guard (256...1024).contains(n.drop(while: { $0 == 0 }).count) else {
                throw WebAuthnError(.malformedPublicKey, "an RSA key has 2048 to 8192 bits")
            }
            do { material = .rsa(try _RSA.Signing.PublicKey(n: n, e: e), n: n, e: e) } catch {
                throw WebAuthnError(.malformedPublicKey, "n and e are not an RSA public key of at least 2048 bits")
            }
        }
    }

    /// The COSE_Key encoding, in CTAP2 canonical order (the shorter key encodings first: 1, 3, -1…).
    public var cbor: Data {
        let entries: [(key: CBOR, value: CBOR)]
        switch material {
        case .p256(let key):
            let raw = key.rawRepresentation
            entries = [
                (key: .int(Label.keyType), value: .int(Self.keyTypeEC2)),
                (key: .int(Label.algorithm), value: .int(Algorithm.es256.rawValue)),
                (key: .int(Label.curve), value: .int(Self.curveP256)),
                (key: .int(Label.x), value: .bytes(Data(raw.prefix(32)))),
                (key: .int(Label.y), value: .bytes(Data(raw.suffix(32)))),
            ]
        case .ed25519(let key):
            entries = [
                (key: .int(Label.keyType), value: .int(Self.keyTypeOKP)),
                (key: .int(Label.algorithm), value: .int(Algorithm.edDSA.rawValue)),
                (key: .int(Label.curve), value: .int(Self.curveEd25519)),
                (key: .int(Label.x), value: .bytes(key.rawRepresentation)),
            ]
        case .rsa(_, let n, let e):
            entries = [
                (key: .int(Label.keyType), value: .int(Self.keyTypeRSA)),
                (key: .int(Label.algorithm), value: .int(Algorithm.rs256.rawValue)),
                (key: .int(Label.curve), value: .bytes(n)), (key: .int(Label.x), value: .bytes(e)),
            ]
        }
        return CBOR.map(entries).encoded()
    }

    /// Whether `signature`, in WebAuthn's encoding for the key's algorithm (ASN.1 DER for ES256,
    /// 64 bytes for EdDSA, the modulus' length for RS256), is a valid signature by this key of
    /// `message`. A malformed signature is simply invalid.
    public func isValidSignature(_ signature: Data, for message: Data) -> Bool {
        switch material {
        case .p256(let key):
            guard let parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(parsed, for: message)
        case .ed25519(let key):
            return key.isValidSignature(signature, for: message)
        case .rsa(let key, _, _):
            return key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature),
                for: message,
                padding: .insecurePKCS1v1_5
            )
        }
    }

    public static func == (lhs: COSEKey, rhs: COSEKey) -> Bool { lhs.cbor == rhs.cbor }

    /// A missing or non-integer parameter is malformed.
    private static func integer(_ value: CBOR?, name: String) throws -> Int {
        guard let value, let actual = value.intValue else {
            throw WebAuthnError(.malformedPublicKey, "\(name) is missing or not an integer")
        }
        return actual
    }

    /// A different integer is a key we don't support.
    private static func require(_ actual: Int, equals expected: Int, name: String) throws {
        guard actual == expected else { throw unsupported("\(name) is \(actual)") }
    }

    private static func unsupported(_ what: String) -> WebAuthnError {
        WebAuthnError(
            .unsupportedAlgorithm,
            "\(what); supported are ES256 (EC2 P-256, alg -7), EdDSA (OKP Ed25519, alg -8) and RS256 (RSA ≥ 2048 bits, alg -257)"
        )
    }
}
