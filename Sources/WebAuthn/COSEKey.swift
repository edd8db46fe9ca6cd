import Crypto
import Foundation

/// A credential public key in COSE form (RFC 9052/9053), restricted to ES256: an EC2 key on P-256
/// used with ECDSA over SHA-256. That is the one algorithm every WebAuthn authenticator supports
/// and the only one this module accepts.
public struct COSEKey: Equatable, Sendable {
    /// COSE labels and values this module understands (RFC 9053, IANA COSE registries).
    enum Label {
        static let keyType = 1
        static let algorithm = 3
        static let curve = -1
        static let x = -2
        static let y = -3
    }
    static let keyTypeEC2 = 2
    static let algorithmES256 = -7
    static let curveP256 = 1

    public let publicKey: P256.Signing.PublicKey

    public init(_ key: P256.Signing.PublicKey) {
        publicKey = key
    }

    /// Parses a COSE_Key. Any other key type, algorithm or curve is `unsupportedAlgorithm`; a key
    /// that claims ES256 but is not a well-formed P-256 point is `malformedPublicKey`. Extra
    /// parameters (such as `kid`) are ignored, as COSE allows.
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
        try Self.require(item[Label.keyType], equals: Self.keyTypeEC2, name: "key type (kty)")
        try Self.require(item[Label.algorithm], equals: Self.algorithmES256, name: "algorithm (alg)")
        try Self.require(item[Label.curve], equals: Self.curveP256, name: "curve (crv)")
        // ES256 keys must use the uncompressed form: y as bytes, never the compressed sign bit.
        guard let x = item[Label.x]?.bytesValue, x.count == 32,
              let y = item[Label.y]?.bytesValue, y.count == 32
        else {
            throw WebAuthnError(.malformedPublicKey, "EC2 key needs 32-byte x and y coordinates (uncompressed form)")
        }
        do {
            publicKey = try P256.Signing.PublicKey(rawRepresentation: x + y)
        } catch {
            throw WebAuthnError(.malformedPublicKey, "x and y are not a point on P-256")
        }
    }

    /// The COSE_Key encoding: {1: 2, 3: -7, -1: 1, -2: x, -3: y}, in CTAP2 canonical order.
    public var cbor: Data {
        let raw = publicKey.rawRepresentation
        return CBOR.map([
            (key: .int(Label.keyType), value: .int(Self.keyTypeEC2)),
            (key: .int(Label.algorithm), value: .int(Self.algorithmES256)),
            (key: .int(Label.curve), value: .int(Self.curveP256)),
            (key: .int(Label.x), value: .bytes(Data(raw.prefix(32)))),
            (key: .int(Label.y), value: .bytes(Data(raw.suffix(32)))),
        ]).encoded()
    }

    /// Whether `signature` (ASN.1 DER, as WebAuthn transmits ES256 signatures) is a valid ECDSA
    /// signature by this key over SHA-256 of `message`. Malformed DER is simply invalid.
    public func isValidSignature(_ signature: Data, for message: Data) -> Bool {
        guard let parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature) else {
            return false
        }
        return publicKey.isValidSignature(parsed, for: message)
    }

    public static func == (lhs: COSEKey, rhs: COSEKey) -> Bool {
        lhs.publicKey.rawRepresentation == rhs.publicKey.rawRepresentation
    }

    /// A missing or non-integer parameter is malformed; a different integer is a key we don't support.
    private static func require(_ value: CBOR?, equals expected: Int, name: String) throws {
        guard let value, let actual = value.intValue else {
            throw WebAuthnError(.malformedPublicKey, "\(name) is missing or not an integer")
        }
        guard actual == expected else {
            throw WebAuthnError(.unsupportedAlgorithm, "\(name) is \(actual); only ES256 (EC2, alg -7, P-256) is supported")
        }
    }
}
