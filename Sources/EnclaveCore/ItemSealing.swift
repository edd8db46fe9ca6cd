import Crypto
import Foundation
import _CryptoExtras

/// Encryption of keychain secrets at rest. Each item has its own random AES-256-GCM key; that key
/// is sealed under its class key (`KeyHierarchy`), so deleting the item's row deletes its key, and
/// deleting a class key deletes every item of the class. The item's identity is the associated
/// data of both seals, so a sealed secret cannot be moved to another row, app or user. With
/// `applicationPassword` the item key is sealed once more under a key derived from that password
/// (scrypt).
public enum ItemSealing {
    public struct Sealed: Sendable, Equatable {
        public var wrappedKey: Data
        public var ciphertext: Data
        /// scrypt salt when the item also needs the application password.
        public var passwordSalt: Data?
        public init(wrappedKey: Data, ciphertext: Data, passwordSalt: Data?) {
            self.wrappedKey = wrappedKey
            self.ciphertext = ciphertext
            self.passwordSalt = passwordSalt
        }
    }

    /// The key items were sealed under before class keys (derived from the master key, so never
    /// destroyable): read once, when the daemon rewraps such items under their class keys.
    public static func legacyUserKey(master: SymmetricKey, uid: UInt32) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: master,
            salt: Data("laenclaved keychain v1".utf8),
            info: Data("uid \(uid)".utf8),
            outputByteCount: 32
        )
    }

    static func passwordKey(_ password: Data, salt: Data) throws -> SymmetricKey {
        try KDF.Scrypt.deriveKey(
            from: password,
            salt: salt,
            outputByteCount: 32,
            rounds: 1 << 14,
            blockSize: 8,
            parallelism: 1
        )
    }

    public static func seal(
        _ secret: Data,
        key classKey: SymmetricKey,
        identity: Data,
        applicationPassword: Data? = nil
    ) throws -> Sealed {
        let itemKey = SymmetricKey(size: .bits256)
        let ciphertext = try AES.GCM.seal(secret, using: itemKey, authenticating: identity).combined!
        var keyBytes = itemKey.withUnsafeBytes { Data($0) }
        var salt: Data?
        if let password = applicationPassword {
            let s = SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) }
            salt = s
            keyBytes = try AES.GCM.seal(keyBytes, using: try passwordKey(password, salt: s), authenticating: identity)
                .combined!
        }
        let wrapped = try AES.GCM.seal(keyBytes, using: classKey, authenticating: identity).combined!
        return Sealed(wrappedKey: wrapped, ciphertext: ciphertext, passwordSalt: salt)
    }

    /// The same item with its key wrapped under `new` instead of `old`; the secret (and an
    /// application password's layer) is not touched.
    public static func rewrap(
        _ sealed: Sealed,
        from old: SymmetricKey,
        to new: SymmetricKey,
        identity: Data
    ) throws -> Sealed {
        let keyBytes: Data
        do {
            keyBytes = try AES.GCM.open(
                AES.GCM.SealedBox(combined: sealed.wrappedKey),
                using: old,
                authenticating: identity
            )
        } catch {
            throw CoreError(.wrongKeyOrTampered, "the item does not open with its key: another key's, or tampered with")
        }
        var result = sealed
        result.wrappedKey = try AES.GCM.seal(keyBytes, using: new, authenticating: identity).combined!
        return result
    }

    public static func open(
        _ sealed: Sealed,
        key classKey: SymmetricKey,
        identity: Data,
        applicationPassword: Data? = nil
    ) throws -> Data {
        do {
            var keyBytes = try AES.GCM.open(
                AES.GCM.SealedBox(combined: sealed.wrappedKey),
                using: classKey,
                authenticating: identity
            )
            if let salt = sealed.passwordSalt {
                guard let password = applicationPassword else {
                    throw CoreError(.applicationPasswordNeeded, "the item needs its application password")
                }
                // The outer wrap opened with the class key: a failure here is the password's.
                let box = try AES.GCM.SealedBox(combined: keyBytes)
                do {
                    keyBytes = try AES.GCM.open(
                        box,
                        using: try passwordKey(password, salt: salt),
                        authenticating: identity
                    )
                } catch {
                    throw CoreError(.wrongApplicationPassword, "the application password is not the item's")
                }
            }
            return try AES.GCM.open(
                AES.GCM.SealedBox(combined: sealed.ciphertext),
                using: SymmetricKey(data: keyBytes),
                authenticating: identity
            )
        } catch let p as CoreError {
            throw p
        } catch {
            throw CoreError(.wrongKeyOrTampered, "the item does not open with its key: another key's, or tampered with")
        }
    }
}
