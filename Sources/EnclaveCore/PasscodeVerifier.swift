import Crypto
import Foundation
import _CryptoExtras

/// The stored form of the device passcode: scrypt with a per-user random salt, keyed in the daemon
/// (`keyed`) so the stored form alone tests no guess. The plain passcode exists only for the
/// duration of one check and is never stored or logged.
public struct PasscodeVerifier: Codable, Sendable, Equatable {
    /// log2 of scrypt's N for new verifiers: 17 with r = 8, p = 1 (OWASP's minimum for scrypt:
    /// 128 MiB and about half a second a check); tests may choose a cheaper cost, never below
    /// `minimumCost`. Verifiers made at a lower cost are remade at this one on their next success.
    public static let defaultCost = 17
    public static let minimumCost = 10
    /// The memory one check takes: 128 · r · N bytes.
    public static func memory(cost: Int, blockSize: Int = 8) -> Int { 128 * blockSize * (1 << cost) }
    /// Characters a new passcode needs by default (configurable down to `lowestMinimumLength`);
    /// passcodes set before keep working.
    public static let minimumLength = 6
    public static let lowestMinimumLength = 4

    public var salt: Data
    public var hash: Data
    public var cost: Int
    public var blockSize: Int
    public var parallelism: Int
    /// The passcode's length in characters, in the clear: only in an unkeyed verifier (one from
    /// before, or the login server's). A keyed one seals it (`sealedLength`). `lactl doctor` says
    /// when it is below today's minimum.
    public var length: Int?
    /// Whether `hash` is HMAC-SHA256, under a key the daemon's master key derives, of scrypt's
    /// output (issue 31): a copy of the state without that key tests no guess — and on the TPM root
    /// the master key needs the TPM, so no copy away from it does. nil: scrypt's output as is (a
    /// verifier from before, remade keyed on its next success; the login server's hashes).
    public var keyed: Bool?
    /// The length, sealed (AES-GCM) under that key: what a copy would tell of the passcode's kind.
    public var sealedLength: Data?
    /// Whether `hash` is HMAC-SHA256 under the key of a keyed verifier's hash under an earlier key:
    /// a verifier of a state moved from the software root to the TPM root (`moved`), whose scrypt
    /// output the move never had. Checking it needs both keys; its next success remakes it keyed
    /// under the key alone.
    public var priorKeyed: Bool?

    public var isKeyed: Bool { keyed == true }

    // A keyed hash is stored under a name of its own: a daemon from before keying fails to read it
    // (and says so) rather than compare scrypt's output with it and count the right passcode wrong;
    // a moved one under another, for a daemon from before moves.
    private enum CodingKeys: String, CodingKey {
        case salt, hash, keyedHash, movedHash, cost, blockSize, parallelism, length, keyed, sealedLength
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        salt = try c.decode(Data.self, forKey: .salt)
        keyed = try c.decodeIfPresent(Bool.self, forKey: .keyed)
        // A keyed hash stored under "hash" (before its own name) still reads.
        if let moved = try c.decodeIfPresent(Data.self, forKey: .movedHash) {
            guard keyed == true else {
                throw DecodingError.dataCorruptedError(
                    forKey: .movedHash,
                    in: c,
                    debugDescription: "a moved passcode verifier is keyed"
                )
            }
            hash = moved
            priorKeyed = true
        } else {
            hash =
                try keyed == true
                ? c.decodeIfPresent(Data.self, forKey: .keyedHash) ?? c.decode(Data.self, forKey: .hash)
                : c.decode(Data.self, forKey: .hash)
        }
        cost = try c.decode(Int.self, forKey: .cost)
        blockSize = try c.decode(Int.self, forKey: .blockSize)
        parallelism = try c.decode(Int.self, forKey: .parallelism)
        length = try c.decodeIfPresent(Int.self, forKey: .length)
        sealedLength = try c.decodeIfPresent(Data.self, forKey: .sealedLength)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(salt, forKey: .salt)
        try c.encode(hash, forKey: priorKeyed == true ? .movedHash : isKeyed ? .keyedHash : .hash)
        try c.encode(cost, forKey: .cost)
        try c.encode(blockSize, forKey: .blockSize)
        try c.encode(parallelism, forKey: .parallelism)
        try c.encodeIfPresent(length, forKey: .length)
        try c.encodeIfPresent(keyed, forKey: .keyed)
        try c.encodeIfPresent(sealedLength, forKey: .sealedLength)
    }

    public init(salt: Data, hash: Data, cost: Int, blockSize: Int, parallelism: Int, length: Int? = nil) {
        self.salt = salt
        self.hash = hash
        self.cost = cost
        self.blockSize = blockSize
        self.parallelism = parallelism
        self.length = length
    }

    private static let tooLong = CoreError(.passcodeTooLong, "a passcode may have at most 256 bytes")
    private static let keyNeeded = CoreError(
        .verifierKeyNeeded,
        "this passcode verifier is keyed: it is checked only with its key"
    )

    public static func validate(_ passcode: String, minimumLength: Int = minimumLength) throws {
        if passcode.count < max(minimumLength, lowestMinimumLength) {
            let minimum = max(minimumLength, lowestMinimumLength)
            throw CoreError(.passcodeTooShort, "a passcode needs at least \(minimum) characters")
        }
        if passcode.utf8.count > 256 { throw Self.tooLong }
    }

    /// A verifier for a new passcode, which must have `minimumLength` characters.
    public static func make(
        passcode: String,
        cost: Int = defaultCost,
        minimumLength: Int = minimumLength,
        key: SymmetricKey? = nil
    ) throws -> PasscodeVerifier {
        try validate(passcode, minimumLength: minimumLength)
        return try remade(passcode: passcode, cost: cost, key: key)
    }

    /// Whether this verifier is weaker than one made now at `cost` would be.
    public func needsUpgrade(toCost cost: Int) -> Bool {
        self.cost < max(cost, Self.minimumCost) || blockSize < 8 || parallelism != 1
    }

    /// A fresh verifier (new salt, `cost`; keyed with `key`) for a passcode that was just checked:
    /// no length rule, as a passcode set before the rule keeps working.
    public static func remade(passcode: String, cost: Int, key: SymmetricKey? = nil) throws -> PasscodeVerifier {
        if passcode.utf8.count > 256 { throw Self.tooLong }
        var salt = Data(count: 16)
        salt.withUnsafeMutableBytes { buf in
            var rng = SystemRandomNumberGenerator()
            for i in buf.indices { buf[i] = UInt8.random(in: 0...255, using: &rng) }
        }
        var v = PasscodeVerifier(
            salt: salt,
            hash: Data(),
            cost: max(cost, minimumCost),
            blockSize: 8,
            parallelism: 1,
            length: key == nil ? passcode.count : nil
        )
        if let key {
            v.keyed = true
            try v.noteLength(passcode.count, key: key)
        }
        v.hash = try v.derive(passcode, key: key)
        return v
    }

    /// This verifier checked under `key` instead, without the passcode (a state moving from the
    /// software root to the TPM root, whose keys `prior` and `key` are): the hash is keyed again
    /// under `key` (so `prior`, which the key file alone gives, tests no guess), and the length
    /// sealed under `key`. One move only: a moved verifier is remade before it could move again.
    public func moved(to key: SymmetricKey, from prior: SymmetricKey) throws -> PasscodeVerifier {
        guard priorKeyed != true else {
            throw CoreError(
                .verifierMovedAlready,
                "this passcode verifier moved to another key already; it moves again once remade"
            )
        }
        var next = self
        next.hash = Data(HMAC<SHA256>.authenticationCode(for: hash, using: key))
        let length = self.length(key: prior)
        next.sealedLength = nil
        next.length = nil
        if isKeyed { next.priorKeyed = true }
        next.keyed = true
        if let length { try next.noteLength(length, key: key) }
        return next
    }

    /// The verifier output for an attempt; compare with `matches`. A keyed verifier needs its key,
    /// and a moved one (`priorKeyed`) the key it had before too.
    public func derive(_ passcode: String, key: SymmetricKey? = nil, prior: SymmetricKey? = nil) throws -> Data {
        let derived = try KDF.Scrypt.deriveKey(
            from: Array(passcode.utf8),
            salt: salt,
            outputByteCount: 32,
            rounds: 1 << cost,
            blockSize: blockSize,
            parallelism: parallelism
        )
        guard isKeyed else { return derived.withUnsafeBytes { Data($0) } }
        guard let key else { throw Self.keyNeeded }
        guard priorKeyed == true else {
            return derived.withUnsafeBytes { Data(HMAC<SHA256>.authenticationCode(for: $0, using: key)) }
        }
        guard let prior else { throw Self.keyNeeded }
        let inner = derived.withUnsafeBytes { Data(HMAC<SHA256>.authenticationCode(for: $0, using: prior)) }
        return Data(HMAC<SHA256>.authenticationCode(for: inner, using: key))
    }

    /// The passcode's length, when known: opened with `key` in a keyed verifier.
    public func length(key: SymmetricKey?) -> Int? {
        guard let sealedLength else { return length }
        guard let key, let box = try? AES.GCM.SealedBox(combined: sealedLength),
            let opened = try? AES.GCM.open(box, using: key, authenticating: Self.lengthContext), opened.count == 2
        else { return nil }
        return Int(opened[opened.startIndex]) << 8 | Int(opened[opened.startIndex + 1])
    }

    /// Notes the length: sealed under `key` (a keyed verifier), in the clear otherwise.
    public mutating func noteLength(_ count: Int, key: SymmetricKey?) throws {
        guard isKeyed, let key else {
            length = count
            return
        }
        let bytes = Data([UInt8(truncatingIfNeeded: min(count, 0xFFFF) >> 8), UInt8(truncatingIfNeeded: count)])
        guard let combined = try AES.GCM.seal(bytes, using: key, authenticating: Self.lengthContext).combined else {
            throw Self.keyNeeded
        }
        sealedLength = combined
        length = nil
    }

    private static let lengthContext = Data("laenclaved passcode length".utf8)

    public func matches(_ attempt: Data) -> Bool { ConstantTime.equal(hash, attempt) }
}

/// The opaque value apps see as `domainState.biometry.stateHash`: different for each app identity,
/// and different after every enrolment change (the generation counts changes, so add-then-remove
/// also yields a new value). HMAC under a per-user secret that never leaves the daemon.
public enum DomainStateHash {
    public static func compute(
        secret: Data,
        app: String,
        sensor: String,
        generation: UInt64,
        identities: [String]
    ) -> Data? {
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

/// The last domain state hash per app, with what it was made from: made again only when one of
/// those changed (every `canEvaluatePolicy` and evaluation answers one; an HMAC each time
/// otherwise). At most `maxApps` apps are remembered; past that the memo starts over.
public struct DomainStateMemo: Sendable {
    public static let maxApps = 64

    private struct Inputs: Equatable {
        var secret: Data
        var sensor: String
        var generation: UInt64
        var identities: [String]
    }

    private var entries: [String: (inputs: Inputs, hash: Data?)] = [:]

    public init() {}

    public mutating func hash(
        secret: Data,
        app: String,
        sensor: String,
        generation: UInt64,
        identities: [String]
    ) -> Data? {
        let inputs = Inputs(secret: secret, sensor: sensor, generation: generation, identities: identities)
        if let known = entries[app], known.inputs == inputs { return known.hash }
        let hash = DomainStateHash.compute(
            secret: secret,
            app: app,
            sensor: sensor,
            generation: generation,
            identities: identities
        )
        if entries.count >= Self.maxApps { entries.removeAll(keepingCapacity: true) }
        entries[app] = (inputs, hash)
        return hash
    }
}
