import Crypto
import Foundation

/// A login challenge the server need not store: its fields and an HMAC-SHA-256 over them under the
/// deployment's secret, so any instance can check it, and nothing is written when options are
/// asked for. Single use is recorded when the login completes, in the same transaction as the sign
/// counter and the session (`LoginStore.completePasskeyLogin`).
///
/// Layout (74 bytes, base64url in the options): version 1 · purpose · expiry (milliseconds since
/// 1970, big-endian UInt64) · 16 random bytes (the nonce) · 16 bytes binding it to the named
/// account (zero without a username) · the MAC (32).
struct SignedChallenge: Equatable, Sendable {
    enum Problem: Error, Equatable { case unknown, expired }

    static let version: UInt8 = 1
    static let size = 1 + 1 + 8 + 16 + 16 + 32
    static let unbound = Data(count: 16)

    var purpose: Challenge.Purpose
    var expiresAt: Double
    var nonce: Data
    var binding: Data

    var isBound: Bool { binding != Self.unbound }

    func sealed(with key: SymmetricKey) -> Data {
        let body = Self.body(purpose: purpose, expiresAt: expiresAt, nonce: nonce, binding: binding)
        return body + Data(HMAC<SHA256>.authenticationCode(for: Data("challenge\u{0}".utf8) + body, using: key))
    }

    /// The challenge in `token` if this deployment made it and it has not expired at `now`.
    static func open(_ token: Data, with key: SymmetricKey, at now: Double) throws(Problem) -> SignedChallenge {
        guard token.count == size, token.first == version else { throw .unknown }
        let body = token.prefix(size - 32)
        let mac = token.suffix(32)
        guard
            HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: Data("challenge\u{0}".utf8) + body, using: key)
        else { throw .unknown }
        let bytes = [UInt8](body)
        guard let purpose = Purpose(code: bytes[1]) else { throw .unknown }
        let milliseconds = bytes[2..<10].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let challenge = SignedChallenge(
            purpose: purpose,
            expiresAt: Double(milliseconds) / 1000,
            nonce: Data(bytes[10..<26]),
            binding: Data(bytes[26..<42])
        )
        guard challenge.expiresAt > now else { throw .expired }
        return challenge
    }

    private static func body(purpose: Challenge.Purpose, expiresAt: Double, nonce: Data, binding: Data) -> Data {
        var data = Data([version, purpose.code])
        let milliseconds = UInt64(max(0, expiresAt * 1000).rounded())
        data.append(contentsOf: (0..<8).reversed().map { UInt8(truncatingIfNeeded: milliseconds >> (8 * $0)) })
        return data + nonce + binding
    }

    typealias Purpose = Challenge.Purpose
}

extension Challenge.Purpose {
    var code: UInt8 { self == .registration ? 1 : 2 }
    init?(code: UInt8) {
        switch code {
        case 1: self = .registration
        case 2: self = .authentication
        default: return nil
        }
    }
}
