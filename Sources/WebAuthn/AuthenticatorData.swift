import Crypto
import Foundation

/// Authenticator data (WebAuthn L3 §6.1): what the authenticator asserts about the ceremony,
/// covered by its signature.
///
/// Layout: rpIdHash (32) ‖ flags (1) ‖ signCount (4, big-endian)
///         ‖ [attested credential data, if AT] ‖ [extensions CBOR map, if ED].
public struct AuthenticatorData: Sendable {
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        public static let userPresent = Flags(rawValue: 0x01)
        public static let userVerified = Flags(rawValue: 0x04)
        public static let backupEligible = Flags(rawValue: 0x08)
        public static let backedUp = Flags(rawValue: 0x10)
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        public static let extensionData = Flags(rawValue: 0x80)
    }

    /// The credential created in a registration ceremony (§6.5.1).
    public struct AttestedCredential: Sendable {
        /// 16 bytes identifying the authenticator model; all zero when not disclosed.
        public let aaguid: Data
        public let credentialID: Data
        public let publicKey: COSEKey
        /// The credential public key exactly as the authenticator encoded it. Store these bytes.
        public let publicKeyCBOR: Data

        /// For an authenticator building its own data. `aaguid` must be 16 bytes and
        /// `credentialID` 1...1023 bytes (a programming error otherwise).
        public init(aaguid: Data = Data(count: 16), credentialID: Data, publicKey: COSEKey) {
            precondition(aaguid.count == 16, "AAGUID must be 16 bytes")
            precondition(
                (1...AuthenticatorData.maxCredentialIDLength).contains(credentialID.count),
                "credential ID must be 1...\(AuthenticatorData.maxCredentialIDLength) bytes"
            )
            self.aaguid = Data(aaguid)
            self.credentialID = Data(credentialID)
            self.publicKey = publicKey
            self.publicKeyCBOR = publicKey.cbor
        }

        init(aaguid: Data, credentialID: Data, publicKey: COSEKey, publicKeyCBOR: Data) {
            self.aaguid = aaguid
            self.credentialID = credentialID
            self.publicKey = publicKey
            self.publicKeyCBOR = publicKeyCBOR
        }
    }

    /// Largest authenticator data accepted. Real values are a few hundred bytes at most; the cap
    /// matches the attestation object limit.
    public static let maxSize = 16 * 1024
    /// The WebAuthn L3 upper bound on credential ID length (§7.1 step 25).
    public static let maxCredentialIDLength = 1023
    static let fixedPartLength = 37

    public let rpIDHash: Data
    public let flags: Flags
    public let signCount: UInt32
    public let attestedCredential: AttestedCredential?
    /// Authenticator extension outputs (a CBOR map), present exactly when the ED flag is set.
    public let extensions: CBOR?
    /// The exact bytes, which signatures cover.
    public let raw: Data

    /// Parses authenticator data strictly: every length must add up, the AT and ED flags must agree
    /// with what follows, no byte may be left over, and BS (backed up) requires BE (backup eligible).
    /// CBOR syntax errors inside keep their `malformedCBOR` code; a credential public key that is
    /// not ES256 is `unsupportedAlgorithm`.
    public init(_ raw: Data) throws {
        guard raw.count <= Self.maxSize else {
            throw WebAuthnError(.tooLarge, "authenticator data is \(raw.count) bytes; the limit is \(Self.maxSize)")
        }
        let bytes = Data(raw)  // rebased copy: indices start at 0 whatever slice we were given
        guard bytes.count >= Self.fixedPartLength else {
            throw Self.malformed(
                "authenticator data is \(bytes.count) bytes; at least \(Self.fixedPartLength) are required"
            )
        }
        rpIDHash = bytes.subdata(in: 0..<32)
        flags = Flags(rawValue: bytes[32])
        signCount = bytes[33..<37].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        if flags.contains(.backedUp) && !flags.contains(.backupEligible) {
            throw Self.malformed("backed-up (BS) flag set on a credential that is not backup eligible (BE)")
        }

        var offset = Self.fixedPartLength
        if flags.contains(.attestedCredentialData) {
            guard bytes.count - offset >= 18 else {
                throw Self.malformed("AT flag set but attested credential data is missing or truncated")
            }
            let aaguid = bytes.subdata(in: offset..<offset + 16)
            let idLength = Int(bytes[offset + 16]) << 8 | Int(bytes[offset + 17])
            offset += 18
            guard idLength >= 1, idLength <= Self.maxCredentialIDLength else {
                throw Self.malformed("credential ID length \(idLength) is outside 1...\(Self.maxCredentialIDLength)")
            }
            guard bytes.count - offset >= idLength else {
                throw Self.malformed(
                    "credential ID length \(idLength) exceeds the remaining \(bytes.count - offset) byte(s)"
                )
            }
            let credentialID = bytes.subdata(in: offset..<offset + idLength)
            offset += idLength
            guard offset < bytes.count else {
                throw Self.malformed("credential public key is missing")
            }
            let keyLength = try CBOR.decodePrefix(bytes.subdata(in: offset..<bytes.count)).length
            let keyCBOR = bytes.subdata(in: offset..<offset + keyLength)
            offset += keyLength
            attestedCredential = AttestedCredential(
                aaguid: aaguid,
                credentialID: credentialID,
                publicKey: try COSEKey(cbor: keyCBOR),
                publicKeyCBOR: keyCBOR
            )
        } else {
            attestedCredential = nil
        }

        if flags.contains(.extensionData) {
            guard offset < bytes.count else {
                throw Self.malformed("ED flag set but extension data is missing")
            }
            let (value, length) = try CBOR.decodePrefix(bytes.subdata(in: offset..<bytes.count))
            guard case .map = value else {
                throw Self.malformed("extension data is not a CBOR map")
            }
            extensions = value
            offset += length
        } else {
            extensions = nil
        }

        guard offset == bytes.count else {
            throw Self.malformed("\(bytes.count - offset) unexpected trailing byte(s) (check the AT and ED flags)")
        }
        self.raw = bytes
    }

    /// Builds authenticator data, as an authenticator does. The AT and ED flags are derived from
    /// whether `attestedCredential` and `extensions` are given; any passed in `flags` are replaced.
    /// Other flags are written as given (so tests can build deliberately inconsistent data).
    public init(
        rpID: String,
        flags: Flags,
        signCount: UInt32,
        attestedCredential: AttestedCredential? = nil,
        extensions: CBOR? = nil
    ) {
        var flags = flags
        flags.remove([.attestedCredentialData, .extensionData])
        if attestedCredential != nil { flags.insert(.attestedCredentialData) }
        if extensions != nil { flags.insert(.extensionData) }

        rpIDHash = Data(SHA256.hash(data: Data(rpID.utf8)))
        self.flags = flags
        self.signCount = signCount
        self.attestedCredential = attestedCredential
        self.extensions = extensions

        var bytes = rpIDHash
        bytes.append(flags.rawValue)
        bytes.append(contentsOf: withUnsafeBytes(of: signCount.bigEndian) { Array($0) })
        if let credential = attestedCredential {
            bytes.append(credential.aaguid)
            bytes.append(UInt8(credential.credentialID.count >> 8))
            bytes.append(UInt8(credential.credentialID.count & 0xFF))
            bytes.append(credential.credentialID)
            bytes.append(credential.publicKeyCBOR)
        }
        if let extensions {
            bytes.append(extensions.encoded())
        }
        raw = bytes
    }

    private static func malformed(_ message: String) -> WebAuthnError {
        WebAuthnError(.malformedAuthenticatorData, message)
    }
}
