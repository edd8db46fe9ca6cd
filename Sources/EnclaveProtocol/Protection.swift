/// `kSecAttrAccessible…`: when an item may be used, and whether it may leave the device. The raw
/// values are Apple's value strings; the one definition the client, the wire and the daemon share.
public enum Protection: String, Codable, Sendable, CaseIterable {
    case whenUnlocked = "ak"
    case afterFirstUnlock = "ck"
    /// Deprecated by Apple, still accepted.
    case always = "dk"
    case whenUnlockedThisDeviceOnly = "aku"
    case afterFirstUnlockThisDeviceOnly = "cku"
    case alwaysThisDeviceOnly = "dku"
    /// Needs a device passcode to be stored, and is deleted when the passcode is removed.
    case whenPasscodeSetThisDeviceOnly = "akpu"

    /// Bound to this device: such an item cannot be synchronizable.
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlocked, .afterFirstUnlock, .always: return false
        case .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly,
            .whenPasscodeSetThisDeviceOnly:
            return true
        }
    }
}
