import Crypto
import Foundation
import WebAuthn

/// Whose failures a typed password is judged on and counted against (our choice, after OWASP's
/// "device cookies"): an attacker who knows only a username can slow and lock the username's
/// path, never the owner's own ways in.
/// - `anyone`: a password login with nothing else — the username's record (5 free failures, then
///   waits, a lock at 100: NIST SP 800-63B's bound) and the address-and-username's;
/// - `session`: typed again inside a signed-in session (a step-up, a password change) — that
///   session's own record: its holder signed in already (with a bound device or the password), so
///   an attacker's failures on the name do not make them wait;
/// - `knownClient`: a login from a client that signed in with this password before (it sends
///   the client token it was given then) — that token's own record. This is the way back from
///   the username's lock for an account without a passkey; the attacker has no token.
/// `session` and `knownClient` share `RateLimits.passwordPerProof` (5 free failures, then waits,
/// a lock after 10): a stolen token or session gets 10 guesses, where the name's lock holds.
enum PasswordBudget: Equatable {
    case anyone(username: String, addressKey: String)
    case session(tokenHash: Data)
    case knownClient(nonce: Data)

    /// The failure records this attempt is counted in, before its password is checked.
    var keys: [String] {
        switch self {
        case .anyone(let username, let addressKey): return [LoginService.accountPasswordKey(username), LoginService.addressPasswordKeyPrefix(username) + addressKey]
        case .session(let tokenHash): return ["password session \(tokenHash.base64URLEncodedString())"]
        case .knownClient(let nonce): return ["password client \(nonce.base64URLEncodedString())"]
        }
    }

    func decide(_ records: [String: FailureRecord], _ limits: RateLimits, at now: Double) -> ThrottleDecision {
        let keys = self.keys
        switch self {
        case .anyone:
            return limits.passwordPerAccount.decide(records[keys[0]], at: now).combined(with: limits.passwordPerAddressAndAccount.decide(records[keys[1]], at: now))
        case .session, .knownClient:
            return limits.passwordPerProof.decide(records[keys[0]], at: now)
        }
    }

    /// What a right password clears: this attempt's records and the username's own (a success
    /// anywhere lifts its waits and lock, as a passkey login does).
    func clearedBySuccess(username: String) -> [String] {
        Array(Set(keys + [LoginService.accountPasswordKey(username)])).sorted()
    }

    /// A client token: 16 random bytes and 16 of a MAC binding them to the username, under the
    /// deployment's secret — checked without a look-up, so a token costs the same for any name.
    static func newClientToken(username: String, key: SymmetricKey) -> String {
        let nonce = LoginService.random(16)
        return (nonce + tag(nonce, username, key)).base64URLEncodedString()
    }

    /// The budget of a password login: the token's own when it is one this deployment gave for
    /// this username, the username's otherwise (a wrong or foreign token is ignored, not refused).
    static func login(username: String, addressKey: String, clientToken: String?, key: SymmetricKey) -> PasswordBudget {
        if let clientToken, clientToken.utf8.count <= 64, let raw = Data(base64URLEncoded: clientToken), raw.count == 32 {
            let nonce = Data(raw.prefix(16))
            if WebAuthnVerifier.constantTimeEquals(tag(nonce, username, key), Data(raw.suffix(16))) { return .knownClient(nonce: nonce) }
        }
        return .anyone(username: username, addressKey: addressKey)
    }

    private static func tag(_ nonce: Data, _ username: String, _ key: SymmetricKey) -> Data {
        Data(LoginService.mac("client-token", nonce.base64URLEncodedString() + " " + username, key).prefix(16))
    }
}
