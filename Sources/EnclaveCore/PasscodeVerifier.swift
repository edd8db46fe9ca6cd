import Crypto
import _CryptoExtras
import Foundation

/// The stored form of the device passcode: scrypt with a per-user random salt. The plain passcode
/// exists only for the duration of one check and is never stored or logged.
public struct PasscodeVerifier: Codable, Sendable, Equatable {
    /// log2 of scrypt's N. 15 (32 MiB, ~0.1 s on the reference machine) is the default; tests may
    /// choose a cheaper cost, never below `minimumCost`.
    public static let defaultCost = 15
    public static let minimumCost = 10
    public static let minimumLength = 4

    public var salt: Data
    public var hash: Data
    public var cost: Int
    public var blockSize: Int
    public var parallelism: Int

    public init(salt: Data, hash: Data, cost: Int, blockSize: Int, parallelism: Int) {
        self.salt = salt; self.hash = hash; self.cost = cost; self.blockSize = blockSize; self.parallelism = parallelism
    }

    public enum Problem: Error, Equatable, CustomStringConvertible {
        case tooShort, tooLong
        public var description: String {
            switch self {
            case .tooShort: return "a passcode needs at least \(PasscodeVerifier.minimumLength) characters"
            case .tooLong: return "a passcode may have at most 256 bytes"
            }
        }
    }

    public static func validate(_ passcode: String) throws {
        if passcode.count < minimumLength { throw Problem.tooShort }
        if passcode.utf8.count > 256 { throw Problem.tooLong }
    }

    public static func make(passcode: String, cost: Int = defaultCost) throws -> PasscodeVerifier {
        try validate(passcode)
        var salt = Data(count: 16)
        salt.withUnsafeMutableBytes { buf in
            var rng = SystemRandomNumberGenerator()
            for i in buf.indices { buf[i] = UInt8.random(in: 0...255, using: &rng) }
        }
        var v = PasscodeVerifier(salt: salt, hash: Data(), cost: max(cost, minimumCost), blockSize: 8, parallelism: 1)
        v.hash = try v.derive(passcode)
        return v
    }

    /// The verifier output for an attempt; compare with `matches`.
    public func derive(_ passcode: String) throws -> Data {
        let key = try KDF.Scrypt.deriveKey(from: Array(passcode.utf8), salt: salt, outputByteCount: 32,
                                           rounds: 1 << cost, blockSize: blockSize, parallelism: parallelism)
        return key.withUnsafeBytes { Data($0) }
    }

    public func matches(_ attempt: Data) -> Bool { ConstantTime.equal(hash, attempt) }
}

/// The opaque value apps see as `domainState.biometry.stateHash`: different for each app identity,
/// and different after every enrolment change (the generation counts changes, so add-then-remove
/// also yields a new value). HMAC under a per-user secret that never leaves the daemon.
public enum DomainStateHash {
    public static func compute(secret: Data, app: String, sensor: String, generation: UInt64, identities: [String]) -> Data? {
        guard !identities.isEmpty else { return nil }
        var message = Data()
        for part in [app, sensor, String(generation)] + identities.sorted() {
            var length = UInt32(part.utf8.count).bigEndian
            message.append(Data(bytes: &length, count: 4))
            message.append(Data(part.utf8))
        }
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: secret))
        return Data(mac)
    }

    public static func newSecret() -> Data {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
    }
}
