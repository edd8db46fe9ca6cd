import Crypto
import Foundation

/// The TPM's hash algorithms this code names objects with (TPM_ALG_ID).
public enum TPMHash: UInt16, Sendable {
    case sha256 = 0x000B
    case sha384 = 0x000C

    public var digestSize: Int { self == .sha256 ? 32 : 48 }

    func digest<Bytes: DataProtocol>(_ data: Bytes) -> [UInt8] {
        switch self {
        case .sha256: Array(SHA256.hash(data: data))
        case .sha384: Array(SHA384.hash(data: data))
        }
    }

    func hmac(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        switch self {
        case .sha256: Array(HMAC<SHA256>.authenticationCode(for: data, using: SymmetricKey(data: key)))
        case .sha384: Array(HMAC<SHA384>.authenticationCode(for: data, using: SymmetricKey(data: key)))
        }
    }
}

/// The ECC curves this code takes (TPM_ECC_CURVE).
public enum TPMCurve: UInt16, Sendable {
    case p256 = 0x0003
    case p384 = 0x0004

    public var coordinateSize: Int { self == .p256 ? 32 : 48 }
}

/// An ECC object's public area (TPMT_PUBLIC of type TPM_ALG_ECC), as the TPM marshals it: what a
/// key is (its attributes and policy) and its public point. `bytes` is the marshalled form the
/// object's name is a hash of (`name`), and what a WebAuthn `tpm` statement carries as `pubArea`.
public struct TPMPublicArea: Sendable, Equatable {
    public static let eccType: UInt16 = 0x0023
    static let nullAlgorithm: UInt16 = 0x0010
    static let aes: UInt16 = 0x0006
    static let cfb: UInt16 = 0x0043
    static let ecdsa: UInt16 = 0x0018
    static let ecdh: UInt16 = 0x0019

    /// TPMA_OBJECT bits.
    public struct Attributes: OptionSet, Sendable, Equatable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let fixedTPM = Attributes(rawValue: 1 << 1)
        public static let fixedParent = Attributes(rawValue: 1 << 4)
        public static let sensitiveDataOrigin = Attributes(rawValue: 1 << 5)
        public static let userWithAuth = Attributes(rawValue: 1 << 6)
        public static let adminWithPolicy = Attributes(rawValue: 1 << 7)
        public static let noDA = Attributes(rawValue: 1 << 10)
        public static let restricted = Attributes(rawValue: 1 << 16)
        public static let decrypt = Attributes(rawValue: 1 << 17)
        public static let sign = Attributes(rawValue: 1 << 18)
    }

    public let bytes: [UInt8]
    public let nameAlgorithm: TPMHash
    public let attributes: Attributes
    public let authPolicy: [UInt8]
    /// The symmetric algorithm of a storage or endorsement key (AES-CFB), with its key size in
    /// bits; nil for a key without one.
    public let symmetricKeyBits: Int?
    /// The key's scheme (TPM_ALG_ID: ECDSA, ECDH, or NULL for any), as its template names it.
    public let scheme: UInt16
    public let curve: TPMCurve
    public let x: [UInt8]
    public let y: [UInt8]

    public init<Bytes: Sequence>(_ marshalled: Bytes) throws(TPMWireError) where Bytes.Element == UInt8 {
        bytes = Array(marshalled)
        var reader = TPMReader(bytes)
        guard try reader.uint16() == Self.eccType else { throw .unsupported("a public area not of an ECC key") }
        let nameAlg = try reader.uint16()
        guard let hash = TPMHash(rawValue: nameAlg) else { throw .unsupported("name algorithm \(nameAlg)") }
        nameAlgorithm = hash
        attributes = Attributes(rawValue: try reader.uint32())
        authPolicy = try reader.sized()
        let symmetric = try reader.uint16()
        if symmetric == Self.nullAlgorithm {
            symmetricKeyBits = nil
        } else {
            guard symmetric == Self.aes else { throw .unsupported("symmetric algorithm \(symmetric)") }
            symmetricKeyBits = Int(try reader.uint16())
            guard try reader.uint16() == Self.cfb else { throw .unsupported("a symmetric mode other than CFB") }
        }
        scheme = try reader.uint16()
        // ECDSA's and ECDH's details are a hash; ECDAA's has a count too: not taken.
        guard [Self.nullAlgorithm, Self.ecdsa, Self.ecdh].contains(scheme) else {
            throw .unsupported("scheme \(scheme)")
        }
        if scheme != Self.nullAlgorithm { _ = try reader.uint16() }  // the scheme's hash
        let curveID = try reader.uint16()
        guard let curve = TPMCurve(rawValue: curveID) else { throw .unsupported("curve \(curveID)") }
        self.curve = curve
        let kdf = try reader.uint16()
        if kdf != Self.nullAlgorithm { _ = try reader.uint16() }
        x = try reader.sized()
        y = try reader.sized()
        try reader.expectEnd()
        guard x.count == curve.coordinateSize, y.count == curve.coordinateSize else {
            throw .unsupported("a point whose coordinates are not its curve's size")
        }
    }

    /// The object's name: its name algorithm, then that hash of the public area.
    public var name: [UInt8] {
        [UInt8(nameAlgorithm.rawValue >> 8), UInt8(nameAlgorithm.rawValue & 0xFF)] + nameAlgorithm.digest(bytes)
    }

    /// The public point, X9.63 uncompressed.
    public var x963: [UInt8] { [0x04] + x + y }
}
