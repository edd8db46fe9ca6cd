import Crypto
import Foundation
import WebAuthn

/// Whose failures a typed password is judged on and counted against (our choice, after OWASP's
/// "device cookies"): an attacker who knows only a username can slow and lock the username's
/// path, never the owner's own ways in.
/// - `anyone`: a password login with nothing else — the username's record (5 free failures, then
///   waits, a lock at 100: NIST SP 800-63B's bound) and the address-and-username's;
/// - `session`: typed again inside a session signed in with the password (a step-up, a password
///   change) — that session's own record: its holder typed the password already;
/// - `device`: the same inside a passkey session — the record of the device that signed it in, so
///   signing in again with it does not renew the budget (a stolen, unlocked device is worth 10
///   guesses at the password that guards binding new devices, not 10 per login);
/// - `knownClient`: a login from a client that signed in with this password before (it sends
///   the client token it was given then) — that token's own record. This is the way back from
///   the username's lock for an account without a passkey; the attacker has no token. A token is
///   bound to the password it was given under: a password change voids every earlier token, so
///   tokens gathered while a password leaked buy no guesses at the next one.
/// All but `anyone` use `RateLimits.passwordPerProof` (5 free failures, then waits, a lock after 10).
enum PasswordBudget: Equatable {
    case anyone(username: String, addressKey: String)
    case session(tokenHash: Data)
    case device(credentialID: Data)
    case knownClient(nonce: Data)

    /// The budget of a password typed inside `session`.
    static func inSession(_ session: Session) -> PasswordBudget {
        session.credentialID.map { .device(credentialID: $0) } ?? .session(tokenHash: session.tokenHash)
    }

    /// The failure records this attempt is counted in, before its password is checked.
    var keys: [String] {
        switch self {
        case .anyone(let username, let addressKey):
            return [
                LoginService.accountPasswordKey(username), LoginService.addressPasswordKeyPrefix(username) + addressKey,
            ]
        case .session(let tokenHash): return ["password session \(tokenHash.base64URLEncodedString())"]
        case .device(let credentialID): return ["password device \(credentialID.base64URLEncodedString())"]
        case .knownClient(let nonce): return ["password client \(nonce.base64URLEncodedString())"]
        }
    }

    func decide(_ records: [String: FailureRecord], _ limits: RateLimits, at now: Double) -> ThrottleDecision {
        let keys = self.keys
        switch self {
        case .anyone:
            return limits.passwordPerAccount.decide(records[keys[0]], at: now).combined(
                with: limits.passwordPerAddressAndAccount.decide(records[keys[1]], at: now)
            )
        case .session, .device, .knownClient:
            return limits.passwordPerProof.decide(records[keys[0]], at: now)
        }
    }

    /// What a right password clears: this attempt's records and the username's own (a success
    /// anywhere lifts its waits and lock, as a passkey login does).
    func clearedBySuccess(username: String) -> [String] {
        Array(Set(keys + [LoginService.accountPasswordKey(username)])).sorted()
    }

    /// A client token: 16 random bytes and 16 of a MAC binding them to the username and the stored
    /// password hash, under the deployment's secret (a new password, or a hash remade at a higher
    /// cost, voids it; the next password login gives a new one).
    static func newClientToken(username: String, passwordHash: String, key: SymmetricKey) -> String {
        let nonce = LoginService.random(16)
        return (nonce + tag(nonce, username, passwordHash, key)).base64URLEncodedString()
    }

    /// The budget of a password login: the token's own when it is one this deployment gave for this
    /// username under its current password, the username's otherwise (a wrong, foreign or voided
    /// token is ignored, not refused). `passwordHash`: the account's (a stand-in's for an unknown
    /// name, so the check costs the same).
    static func login(
        username: String,
        addressKey: String,
        clientToken: String?,
        passwordHash: String,
        key: SymmetricKey
    ) -> PasswordBudget {
        if let clientToken, clientToken.utf8.count <= 64, let raw = Data(base64URLEncoded: clientToken), raw.count == 32
        {
            let nonce = Data(raw.prefix(16))
            if WebAuthnVerifier.constantTimeEquals(tag(nonce, username, passwordHash, key), Data(raw.suffix(16))) {
                return .knownClient(nonce: nonce)
            }
        }
        return .anyone(username: username, addressKey: addressKey)
    }

    private static func tag(_ nonce: Data, _ username: String, _ passwordHash: String, _ key: SymmetricKey) -> Data {
        Data(
            LoginService.mac("client-token", nonce.base64URLEncodedString() + " " + username + " " + passwordHash, key)
                .prefix(16)
        )
    }
}
