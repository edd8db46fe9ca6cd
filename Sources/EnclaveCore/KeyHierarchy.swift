import Crypto
import EnclaveProtocol
import Foundation

/// A class of a user's secrets that share one key-encryption key, as Apple's data-protection
/// class keys: destroying the class key destroys every secret of the class at once, wherever a
/// copy of its sealed bytes went. Removing the passcode destroys `passcodeSet`.
public enum KeyClass: String, Codable, Sendable, CaseIterable {
    case standard
    case passcodeSet

    public init(_ protection: Protection) {
        self = protection == .whenPasscodeSetThisDeviceOnly ? .passcodeSet : .standard
    }
}

/// How a user's keys wrap one another. The master key file derives, per user, only the key that
/// wraps that user's class keys; the class keys are random and stored wrapped, so deleting one
/// (a row) shreds its class. Below them, each keychain item (`ItemSealing`) and each Secure
/// Enclave key (`KeyBlob`) has a random key of its own, wrapped under its class key and deleted
/// with it. Every wrap names what it wraps (associated data), so no wrapped key can be moved to
/// another user, class or key.
public enum KeyHierarchy {
    /// The key that wraps `uid`'s class keys.
    public static func wrappingKey(master: SymmetricKey, uid: UInt32) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: master,
            salt: Data("laenclaved class keys v2".utf8),
            info: Data("uid \(uid)".utf8),
            outputByteCount: 32
        )
    }

    /// The key of `uid`'s passcode verifier (`PasscodeVerifier.keyed`): the master key gives it, so
    /// on the TPM root only that TPM does.
    public static func passcodeKey(master: SymmetricKey, uid: UInt32) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: master,
            salt: Data("laenclaved passcode verifier v1".utf8),
            info: Data("uid \(uid)".utf8),
            outputByteCount: 32
        )
    }

    /// What a class key's wrap is bound to.
    public static func classKeyContext(uid: UInt32, _ keyClass: KeyClass) -> Data {
        Data("class-key\u{1F}\(uid)\u{1F}\(keyClass.rawValue)".utf8)
    }

    /// What a Secure Enclave key's own key's wrap is bound to.
    public static func enclaveKeyContext(uid: UInt32, handle: Data) -> Data {
        Data("enclave-key\u{1F}\(uid)\u{1F}".utf8) + handle
    }

    public static func wrap(_ key: SymmetricKey, under kek: SymmetricKey, context: Data) throws -> Data {
        try key.withUnsafeBytes { try AES.GCM.seal(Data($0), using: kek, authenticating: context).combined! }
    }

    /// The key, or nil when `wrapped` is not a key wrapped under `kek` for `context`.
    public static func unwrap(_ wrapped: Data, under kek: SymmetricKey, context: Data) -> SymmetricKey? {
        guard let box = try? AES.GCM.SealedBox(combined: wrapped),
            let bytes = try? AES.GCM.open(box, using: kek, authenticating: context),
            bytes.count == 32
        else { return nil }
        return SymmetricKey(data: bytes)
    }
}
