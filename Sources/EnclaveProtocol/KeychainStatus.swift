/// An `OSStatus` the keychain answers with (SecBase.h): Apple's values, the one table the daemon,
/// the wire and `Security`'s `errSec…` constants share. Open-ended, as `OSStatus` is: a value not
/// listed here still travels.
public struct KeychainStatus: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let success = KeychainStatus(rawValue: 0)
    public static let unimplemented = KeychainStatus(rawValue: -4)
    /// Also our answer when a user's keychain is at its quota (items or bytes).
    public static let diskFull = KeychainStatus(rawValue: -34)
    public static let param = KeychainStatus(rawValue: -50)
    public static let allocate = KeychainStatus(rawValue: -108)
    public static let userCanceled = KeychainStatus(rawValue: -128)
    public static let notAvailable = KeychainStatus(rawValue: -25291)
    public static let authFailed = KeychainStatus(rawValue: -25293)
    public static let duplicateItem = KeychainStatus(rawValue: -25299)
    public static let itemNotFound = KeychainStatus(rawValue: -25300)
    /// Our documented answer for an item made unusable by an enrolment change (`.biometryCurrentSet`).
    public static let invalidItemRef = KeychainStatus(rawValue: -25304)
    public static let interactionNotAllowed = KeychainStatus(rawValue: -25308)
    public static let interactionRequired = KeychainStatus(rawValue: -25315)
    public static let decode = KeychainStatus(rawValue: -26275)
    public static let missingEntitlement = KeychainStatus(rawValue: -34018)
    public static let verifyFailed = KeychainStatus(rawValue: -67808)

    public var description: String { "\(rawValue)" }

    public init(from decoder: Decoder) throws { rawValue = try decoder.singleValueContainer().decode(Int32.self) }
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
}

/// `kSecUseAuthenticationUI`: what a keychain call does with an item that would need a prompt.
public enum AuthenticationUI: String, Codable, Sendable, CaseIterable {
    /// Prompt (the default).
    case allow = "u_AuthUIA"
    /// Fail with `errSecInteractionNotAllowed`.
    case fail = "u_AuthUIF"
    /// Leave such items out of the results (searches only).
    case skip = "u_AuthUIS"

    /// Whether no prompt may be shown.
    public var forbidsPrompt: Bool { self != .allow }
}
