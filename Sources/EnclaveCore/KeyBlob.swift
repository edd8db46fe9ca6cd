import Crypto
import EnclaveProtocol
import Foundation

/// A Secure Enclave key as its `dataRepresentation` carries it: the private key and its access
/// control, sealed with AES-256-GCM under the user's key and bound (as associated data) to the
/// user and the app, so the private half never leaves the daemon in clear and another app, user
/// or daemon cannot open it.
public struct KeyBlob: Codable, Equatable, Sendable {
    public var kind: KeyRequest.Kind
    public var privateKey: Data
    public var protection: Protection
    public var flags: AccessControlFlags
    public var enrolmentGeneration: UInt64
    public var passcodeEpoch: UInt64

    public init(kind: KeyRequest.Kind, privateKey: Data, protection: Protection, flags: AccessControlFlags, enrolmentGeneration: UInt64,
                passcodeEpoch: UInt64) {
        self.kind = kind; self.privateKey = privateKey; self.protection = protection; self.flags = flags
        self.enrolmentGeneration = enrolmentGeneration; self.passcodeEpoch = passcodeEpoch
    }

    /// What its access plan is made from.
    public var protected: AccessPlan.Protected {
        AccessPlan.Protected(flags: flags, protection: protection, enrolmentGeneration: enrolmentGeneration, passcodeEpoch: passcodeEpoch)
    }

    static let magic = Data("LAK1".utf8)

    static func identity(uid: UInt32, app: String) -> Data { Data("secure-enclave-key\u{1F}\(uid)\u{1F}\(app)".utf8) }

    public func sealed(userKey: SymmetricKey, uid: UInt32, app: String) throws -> Data {
        let payload = try JSONEncoder().encode(self)
        return Self.magic + (try AES.GCM.seal(payload, using: userKey, authenticating: Self.identity(uid: uid, app: app)).combined!)
    }

    /// The key in `blob`, if it is a `kind` key sealed for this user and app under `userKey`.
    public static func open(_ blob: Data?, kind: KeyRequest.Kind, userKey: SymmetricKey, uid: UInt32, app: String) -> KeyBlob? {
        guard let blob, blob.count > magic.count, blob.prefix(magic.count) == magic,
              let box = try? AES.GCM.SealedBox(combined: blob.dropFirst(magic.count)),
              let payload = try? AES.GCM.open(box, using: userKey, authenticating: identity(uid: uid, app: app)),
              let key = try? JSONDecoder().decode(KeyBlob.self, from: payload), key.kind == kind
        else { return nil }
        return key
    }
}
