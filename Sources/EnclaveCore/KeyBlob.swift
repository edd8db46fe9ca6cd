import Crypto
import EnclaveProtocol
import Foundation

/// A Secure Enclave key as its `dataRepresentation` carries it: the private key and its access
/// control, sealed with AES-256-GCM under a random key of its own and bound (as associated data)
/// to the user, the app and its handle. That key is not in the blob: it is the daemon's record of
/// the key (`KeyRecord`), wrapped under its class key, so deleting the record makes every copy of
/// the blob useless. The private half never leaves the daemon in clear; on a TPM root it never
/// exists outside the TPM (`tpm`).
public struct KeyBlob: Codable, Equatable, Sendable {
    public var kind: KeyRequest.Kind
    /// The private scalar of a key the daemon holds; empty for a key the TPM holds.
    public var privateKey: Data
    /// A key the TPM holds (the TPM root): what loads it there, and its public key.
    public var tpm: TPMKeyMaterial?
    public var protection: Protection
    public var flags: AccessControlFlags
    public var enrolmentGeneration: UInt64
    public var passcodeEpoch: UInt64

    public init(
        kind: KeyRequest.Kind,
        privateKey: Data,
        protection: Protection,
        flags: AccessControlFlags,
        enrolmentGeneration: UInt64,
        passcodeEpoch: UInt64,
        tpm: TPMKeyMaterial? = nil
    ) {
        self.kind = kind
        self.privateKey = privateKey
        self.tpm = tpm
        self.protection = protection
        self.flags = flags
        self.enrolmentGeneration = enrolmentGeneration
        self.passcodeEpoch = passcodeEpoch
    }

    /// Its public key: the TPM's statement of it, or derived from the private scalar. An agreement
    /// key is the same P-256 point, given as a signing key's.
    public var publicKey: P256.Signing.PublicKey {
        get throws {
            if let tpm { return try P256.Signing.PublicKey(x963Representation: tpm.publicKey) }
            return try P256.Signing.PrivateKey(rawRepresentation: privateKey).publicKey
        }
    }

    /// What its access plan is made from.
    public var protected: AccessPlan.Protected {
        AccessPlan.Protected(
            flags: flags,
            protection: protection,
            enrolmentGeneration: enrolmentGeneration,
            passcodeEpoch: passcodeEpoch
        )
    }

    static let magic = Data("LAK2".utf8)
    static let legacyMagic = Data("LAK1".utf8)
    public static let handleSize = 16

    static func identity(uid: UInt32, app: String) -> Data { Data("secure-enclave-key\u{1F}\(uid)\u{1F}\(app)".utf8) }

    /// The blob of this key under `key`, its handle in clear at the front.
    public func sealed(key: SymmetricKey, handle: KeyHandle, uid: UInt32, app: String) throws -> Data {
        precondition(handle.bytes.count == Self.handleSize, "a record's handle")
        let payload = try JSONEncoder().encode(self)
        return Self.magic + handle.bytes
            + (try AES.GCM.seal(payload, using: key, authenticating: Self.identity(uid: uid, app: app) + handle.bytes)
                .combined!)
    }

    /// The record a blob names: its handle, or for a blob made before records (stateless, sealed
    /// under the user's key) its digest, by which it can be revoked. nil: not a key blob.
    public static func handle(of blob: Data?) -> KeyHandle? {
        guard let blob, blob.count > magic.count else { return nil }
        switch blob.prefix(magic.count) {
        case magic:
            guard blob.count > magic.count + handleSize else { return nil }
            return KeyHandle(Data(blob.dropFirst(magic.count).prefix(handleSize)))
        case legacyMagic:
            return KeyHandle(Data(SHA256.hash(data: blob)))
        default:
            return nil
        }
    }

    /// The key in `blob`, if it is a `kind` key sealed for this user and app under `key`.
    public static func open(
        _ blob: Data,
        kind: KeyRequest.Kind,
        key: SymmetricKey,
        uid: UInt32,
        app: String
    ) -> KeyBlob? {
        guard let handle = handle(of: blob), !handle.isLegacy,
            let box = try? AES.GCM.SealedBox(combined: blob.dropFirst(magic.count + handleSize)),
            let payload = try? AES.GCM.open(
                box,
                using: key,
                authenticating: identity(uid: uid, app: app) + handle.bytes
            ),
            let decoded = try? JSONDecoder().decode(KeyBlob.self, from: payload), decoded.kind == kind
        else { return nil }
        return decoded
    }

    /// A blob made before key records (`LAK1`: sealed under the key the master key derives for the
    /// user, `ItemSealing.legacyUserKey`): still accepted until it is revoked by its digest.
    public static func openLegacy(
        _ blob: Data,
        kind: KeyRequest.Kind,
        userKey: SymmetricKey,
        uid: UInt32,
        app: String
    ) -> KeyBlob? {
        guard blob.count > legacyMagic.count, blob.prefix(legacyMagic.count) == legacyMagic,
            let box = try? AES.GCM.SealedBox(combined: blob.dropFirst(legacyMagic.count)),
            let payload = try? AES.GCM.open(box, using: userKey, authenticating: identity(uid: uid, app: app)),
            let key = try? JSONDecoder().decode(KeyBlob.self, from: payload), key.kind == kind
        else { return nil }
        return key
    }
}

/// A Secure Enclave key inside the TPM: its blob (`TPMDevice.createKey`: the public part and the
/// private part only that TPM can open), the random auth value the TPM asks before using it (so
/// the blob alone, read from the bus or a copied state, signs nothing), and its public key (X9.63)
/// as the TPM stated it.
public struct TPMKeyMaterial: Codable, Equatable, Sendable {
    public var blob: Data
    public var auth: Data
    public var publicKey: Data

    public init(blob: Data, auth: Data, publicKey: Data) {
        self.blob = blob
        self.auth = auth
        self.publicKey = publicKey
    }
}

/// The name of the daemon's record of a Secure Enclave key: 16 random bytes, or the SHA-256 of a
/// blob made before records (`isLegacy`), kept only once such a key is revoked.
public struct KeyHandle: Hashable, Sendable {
    public let bytes: Data
    public init(_ bytes: Data) { self.bytes = bytes }
    public static func random() -> KeyHandle { KeyHandle(SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) }) }
    public var isLegacy: Bool { bytes.count == SHA256.byteCount }
}
