/// `SecAccessControlCreateFlags`, with Apple's raw values (SecAccessControl.h): the one
/// definition the client's `Security`, the wire and the daemon's rules share. Travels as its raw
/// number.
public struct AccessControlFlags: OptionSet, Codable, Sendable, Hashable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Biometry or the device passcode; biometry need not be enrolled.
    public static let userPresence = AccessControlFlags(rawValue: 1 << 0)
    /// Any enrolled biometric identity; survives enrolment changes.
    public static let biometryAny = AccessControlFlags(rawValue: 1 << 1)
    /// Only the enrolment current when the item or key was made.
    public static let biometryCurrentSet = AccessControlFlags(rawValue: 1 << 3)
    public static let devicePasscode = AccessControlFlags(rawValue: 1 << 4)
    /// A paired companion device (none exists on Linux).
    public static let companion = AccessControlFlags(rawValue: 1 << 5)
    /// Any one of the constraints suffices.
    public static let or = AccessControlFlags(rawValue: 1 << 14)
    /// Every constraint is required.
    public static let and = AccessControlFlags(rawValue: 1 << 15)
    /// Access control for private-key operations.
    public static let privateKeyUsage = AccessControlFlags(rawValue: 1 << 30)
    /// Extra encryption with an application-supplied password; not a constraint.
    public static let applicationPassword = AccessControlFlags(rawValue: 1 << 31)

    /// The authentication constraints: what `and` / `or` combine.
    public static let constraints: AccessControlFlags = [
        .userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .companion,
    ]
    /// Every bit Apple defines.
    public static let known: AccessControlFlags = constraints.union([.or, .and, .privateKeyUsage, .applicationPassword])
    /// Either biometric constraint.
    public static let biometry: AccessControlFlags = [.biometryAny, .biometryCurrentSet]

    /// The bits Apple does not define, if any.
    public var unknownBits: UInt64 { rawValue & ~Self.known.rawValue }

    public init(from decoder: Decoder) throws { rawValue = try decoder.singleValueContainer().decode(UInt64.self) }
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
}

extension AccessControlFlags: CustomStringConvertible {
    /// Apple's names of the bits, in bit order.
    public static let named: [(flag: AccessControlFlags, name: String)] = [
        (.userPresence, "userPresence"), (.biometryAny, "biometryAny"), (.biometryCurrentSet, "biometryCurrentSet"),
        (.devicePasscode, "devicePasscode"), (.companion, "companion"), (.or, "or"), (.and, "and"),
        (.privateKeyUsage, "privateKeyUsage"), (.applicationPassword, "applicationPassword"),
    ]

    /// "biometryAny,or,devicePasscode"; "none" for no flags; unknown bits in hex.
    public var names: String {
        var parts = Self.named.filter { contains($0.flag) }.map(\.name)
        if unknownBits != 0 { parts.append("0x" + String(unknownBits, radix: 16)) }
        return parts.isEmpty ? "none" : parts.joined(separator: ",")
    }

    public var description: String { names }
}
