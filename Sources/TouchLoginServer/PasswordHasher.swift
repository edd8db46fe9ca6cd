import EnclaveCore
import Foundation

/// Account passwords, stored as scrypt (memory-hard, the device passcode's verifier) with a
/// per-account random salt: `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` (base64). Never stored,
/// logged or compared in clear.
public struct PasswordHasher: Sendable {
    /// log2 of scrypt's N: 17 (OWASP's minimum for scrypt with r = 8: 128 MiB a check) by
    /// default, as the device passcode's; tests lower it to stay fast. Hashes made at another cost
    /// keep verifying (the cost is in the stored string).
    public var cost: Int
    public static let defaultCost = PasscodeVerifier.defaultCost

    public init(cost: Int = PasswordHasher.defaultCost) { self.cost = max(cost, PasscodeVerifier.minimumCost) }

    /// The password rules are the server's (LoginService); this only hashes.
    public func hash(_ password: String) throws -> String {
        let v = try PasscodeVerifier.remade(passcode: password, cost: cost)
        return
            "scrypt$\(v.cost)$\(v.blockSize)$\(v.parallelism)$\(v.salt.base64EncodedString())$\(v.hash.base64EncodedString())"
    }

    /// Constant-time comparison; an unreadable stored hash never matches.
    public func verify(_ password: String, against stored: String) -> Bool {
        let parts = stored.split(separator: "$").map(String.init)
        guard parts.count == 6, parts[0] == "scrypt", let cost = Int(parts[1]),
            (PasscodeVerifier.minimumCost...20).contains(cost),
            let r = Int(parts[2]), r == 8, let p = Int(parts[3]), p == 1,
            let salt = Data(base64Encoded: parts[4]), let hash = Data(base64Encoded: parts[5])
        else { return false }
        let verifier = PasscodeVerifier(salt: salt, hash: hash, cost: cost, blockSize: r, parallelism: p)
        guard let attempt = try? verifier.derive(password) else { return false }
        return verifier.matches(attempt)
    }

    /// Whether `stored` was made at a lower cost than this hasher's (or is unreadable as scrypt):
    /// after a right password it is remade at today's cost.
    public func needsRehash(_ stored: String) -> Bool {
        let parts = stored.split(separator: "$")
        guard parts.count == 6, let made = Int(parts[1]) else { return true }
        return made < cost
    }

    /// What an unknown username's password is checked against: a stored hash's shape at today's
    /// cost, with a salt and a hash no derivation made (building it costs nothing; nothing
    /// matches it), so the check parses, derives and compares exactly as a known name's does.
    public var standIn: String {
        "scrypt$\(cost)$8$1$\(Data(repeating: 0x5a, count: 16).base64EncodedString())$\(Data(count: 32).base64EncodedString())"
    }
}
