import Crypto
import Foundation
import TouchLoginAPI
import WebAuthn

/// What a name without a device is offered in place of one, so that neither the options nor any
/// answer to them tells which names are accounts.
///
/// The decoy credential ID (a device key's length) is a half derived from the challenge's binding
/// to the name (so stable for the name, as a real ID is) followed by a half of a MAC of that, both under the deployment's secret: the server recognises a decoy from the
/// ID alone, under any challenge or none, without storing anything. An assertion that answers
/// with one is checked against a stand-in credential and account exactly as a real device's is,
/// so each wrong answer is refused with the code and message an account would give; and a
/// registration that claims a decoy's ID is refused as a taken one is.
struct Decoy {
    /// A device key's (`touchlogin`'s): the decoy's entry in the options has the commonest real shape.
    static let transports = CredentialKind.deviceKeyTransports
    private static let half = CredentialKind.deviceKeyIDBytes / 2

    /// The decoy listed for the name a challenge's `binding` stands for.
    static func credentialID(binding: Data, key: SymmetricKey) -> Data {
        let seed = Data(LoginService.mac("decoy-credential", binding.base64URLEncodedString(), key).prefix(half))
        return seed + tag(seed, key)
    }

    /// The key the stand-in is checked against: made once per process and its private half
    /// dropped, so no signature can verify against it; built once so a decoy login costs what a
    /// real one does (a key read, one verification), not a key derivation more.
    private static let publicKey = COSEKey(P256.Signing.PrivateKey().publicKey).cbor

    let credential: Credential
    let account: Account

    /// The stand-in, if `credentialID` is a decoy this deployment made.
    init?(credentialID: Data, key: SymmetricKey) {
        guard credentialID.count == 2 * Self.half else { return nil }
        let seed = Data(credentialID.prefix(Self.half))
        guard WebAuthnVerifier.constantTimeEquals(Self.tag(seed, key), Data(credentialID.suffix(Self.half))) else {
            return nil
        }
        credential = Credential(
            id: credentialID,
            accountID: "",
            publicKey: Self.publicKey,
            signCount: 0,
            name: "",
            attestationFormat: "none",
            createdAt: 0,
            lastUsedAt: nil,
            aaguid: Data(count: 16),
            transports: Self.transports
        )
        account = Account(
            id: "",
            username: "",
            passwordHash: "",
            userHandle: LoginService.mac("decoy-user-handle", seed.base64URLEncodedString(), key),
            createdAt: 0
        )
    }

    private static func tag(_ seed: Data, _ key: SymmetricKey) -> Data {
        LoginService.mac("decoy-tag", seed.base64URLEncodedString(), key).prefix(half)
    }
}
