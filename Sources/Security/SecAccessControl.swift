import EnclaveProtocol
import Foundation

/// Apple's `SecAccessControlCreateFlags` (SecAccessControl.h), with Apple's raw values.
public struct SecAccessControlCreateFlags: OptionSet, Sendable, Hashable {
    public let rawValue: CFOptionFlags
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }

    /// Biometry or the device passcode; biometry need not be enrolled.
    public static let userPresence = SecAccessControlCreateFlags(.userPresence)
    /// Any enrolled biometric identity; survives enrolment changes.
    public static let biometryAny = SecAccessControlCreateFlags(.biometryAny)
    @available(*, deprecated, renamed: "biometryAny")
    public static let touchIDAny = SecAccessControlCreateFlags(.biometryAny)
    /// Only the biometric enrolment current when the item was created; any enrolment change makes
    /// the item permanently unusable (`errSecInvalidItemRef` here).
    public static let biometryCurrentSet = SecAccessControlCreateFlags(.biometryCurrentSet)
    @available(*, deprecated, renamed: "biometryCurrentSet")
    public static let touchIDCurrentSet = SecAccessControlCreateFlags(.biometryCurrentSet)
    /// The device passcode.
    public static let devicePasscode = SecAccessControlCreateFlags(.devicePasscode)
    @available(*, deprecated, renamed: "companion")
    public static let watch = SecAccessControlCreateFlags(.companion)
    /// A paired companion device.
    public static let companion = SecAccessControlCreateFlags(.companion)
    /// Any one of the listed constraints suffices.
    public static let or = SecAccessControlCreateFlags(.or)
    /// All listed constraints are required.
    public static let and = SecAccessControlCreateFlags(.and)
    /// Access control for private-key operations (signing…).
    public static let privateKeyUsage = SecAccessControlCreateFlags(.privateKeyUsage)
    /// Extra encryption with an application-supplied password
    /// (`LAContext.setCredential(_:type: .applicationPassword)`); not a constraint.
    public static let applicationPassword = SecAccessControlCreateFlags(.applicationPassword)

    /// Apple's values, from the one definition the wire and the daemon share.
    init(_ flags: AccessControlFlags) { self.init(rawValue: CFOptionFlags(flags.rawValue)) }

    /// The authentication constraints (what `and` / `or` combine).
    static let constraintMask = CFOptionFlags(AccessControlFlags.constraints.rawValue)
    /// Every bit Apple defines.
    static let knownMask = CFOptionFlags(AccessControlFlags.known.rawValue)
}

/// Apple's `SecAccessControl`: an accessibility class (`kSecAttrAccessible…` value) plus
/// `SecAccessControlCreateFlags`. Use it as the value of `kSecAttrAccessControl`.
/// A reference type, as Apple's is, so it survives `[String: Any]` → `CFDictionary` bridging.
/// Create it with `SecAccessControlCreateWithFlags`.
public final class SecAccessControl: CustomStringConvertible, Sendable {
    /// The `kSecAttrAccessible…` value string, e.g. "akpu".
    public var protection: String { accessibility.rawValue }
    public let flags: SecAccessControlCreateFlags
    let accessibility: Protection

    init(protection: Protection, flags: SecAccessControlCreateFlags) {
        self.accessibility = protection
        self.flags = flags
    }

    public var description: String {
        "<SecAccessControl protection: \(protection), flags: 0x\(String(flags.rawValue, radix: 16))>"
    }

    /// The wire form.
    package var wireValue: AccessControlValue {
        AccessControlValue(protection: accessibility, flags: AccessControlFlags(rawValue: UInt64(flags.rawValue)))
    }
}

/// Creates an access-control object (Apple's `SecAccessControlCreateWithFlags`). `allocator` is ignored.
///
/// Returns nil, and stores an `NSError` (domain `NSOSStatusErrorDomain`, code `errSecParam`, a
/// message in `NSLocalizedDescriptionKey`; retained, take it with `takeRetainedValue()`) in `error`
/// when given, for — our rules where Apple is undocumented:
/// - `protection` that is not one of the seven `kSecAttrAccessible…` values;
/// - `.and` together with `.or` (Apple: "only one logical operation can be set");
/// - `.and` or `.or` with no constraint to combine (constraints: `.userPresence`, `.biometryAny`,
///   `.biometryCurrentSet`, `.devicePasscode`, `.companion`; `.applicationPassword` and
///   `.privateKeyUsage` are not constraints);
/// - `.biometryAny` together with `.biometryCurrentSet` (contradictory enrolment rules);
/// - bits that are not among Apple's flags.
/// `.applicationPassword` is accepted alone or with constraints. Several constraints without
/// `.and`/`.or` are accepted; the daemon treats them as all required, as Apple does.
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?,
    _ protection: CFTypeRef,
    _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    func fail(_ message: String) -> SecAccessControl? {
        let e = NSError(
            domain: NSOSStatusErrorDomain,
            code: Int(errSecParam),
            userInfo: [NSLocalizedDescriptionKey: message]
        )
        error?.pointee = Unmanaged.passRetained(e)
        return nil
    }
    guard let p = protection as? String else {
        return fail("SecAccessControlCreateWithFlags: protection must be a kSecAttrAccessible value (a string)")
    }
    guard let accessibility = Protection(rawValue: p) else {
        return fail("SecAccessControlCreateWithFlags: unknown protection '\(p)'; expected a kSecAttrAccessible value")
    }
    let raw = flags.rawValue
    if raw & ~SecAccessControlCreateFlags.knownMask != 0 {
        return fail(
            "SecAccessControlCreateWithFlags: unknown flag bits 0x\(String(raw & ~SecAccessControlCreateFlags.knownMask, radix: 16))"
        )
    }
    if flags.contains(.and) && flags.contains(.or) {
        return fail("SecAccessControlCreateWithFlags: only one logical operation (and / or) can be set")
    }
    if (flags.contains(.and) || flags.contains(.or)) && raw & SecAccessControlCreateFlags.constraintMask == 0 {
        return fail("SecAccessControlCreateWithFlags: and / or given without any constraint to combine")
    }
    if flags.contains(.biometryAny) && flags.contains(.biometryCurrentSet) {
        return fail("SecAccessControlCreateWithFlags: biometryAny and biometryCurrentSet cannot be combined")
    }
    return SecAccessControl(protection: accessibility, flags: flags)
}
