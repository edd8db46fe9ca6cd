import Crypto
import Foundation
import WebAuthn

/// What a name without a device is offered in place of one, so that neither the options nor the
/// answers to them tell which names are accounts: a credential ID (stable for the name, as a real
/// one is) and, for the login that answers with it, a stand-in credential and account that every
/// check runs against as it would against a real device. Its key is derived from the deployment's
/// secret and used only to verify, so no assertion for it can verify.
///
/// Everything is derived from the challenge's binding (16 bytes of a MAC of the name), so the
/// login recognises the decoy without storing anything and without the name.
struct Decoy {
    /// What the enclave client's devices register with (`touchlogin`): the decoy's entry in the
    /// options has the same shape as the commonest real one.
    static let transports = ["internal"]

    let credential: Credential
    let account: Account

    init(binding: Data, key: SymmetricKey) {
        let id = LoginService.mac("decoy-credential", binding.base64URLEncodedString(), key)
        credential = Credential(id: id, accountID: "", publicKey: Self.publicKey(binding: binding, key: key), signCount: 0, name: "",
                                attestationFormat: "none", createdAt: 0, lastUsedAt: nil, aaguid: Data(count: 16), transports: Self.transports)
        account = Account(id: "", username: "", passwordHash: "", userHandle: LoginService.mac("decoy-user-handle", binding.base64URLEncodedString(), key),
                          createdAt: 0)
    }

    /// A P-256 public key whose private half exists only here, for a moment, as COSE.
    private static func publicKey(binding: Data, key: SymmetricKey) -> Data {
        var info = Data("decoy-key\u{0}".utf8) + binding
        while true {
            let scalar = HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: info, outputByteCount: 32)
            // 32 bytes at or above the group order (odds about 2^-32) are not a key: derive again.
            if let privateKey = scalar.withUnsafeBytes({ try? P256.Signing.PrivateKey(rawRepresentation: Data($0)) }) {
                return COSEKey(privateKey.publicKey).cbor
            }
            info.append(0)
        }
    }
}
