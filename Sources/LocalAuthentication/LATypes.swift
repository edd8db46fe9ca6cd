import Foundation

/// Authentication policies, with Apple's raw values.
public enum LAPolicy: Int, Sendable, Hashable, CaseIterable {
    /// Biometrics only. The fallback button ends the evaluation with `userFallback`.
    case deviceOwnerAuthenticationWithBiometrics = 1
    /// Biometrics when available, enrolled and not locked out; otherwise the device passcode.
    case deviceOwnerAuthentication = 2
    /// A companion device. Linux has none yet: always `companionNotAvailable`.
    case deviceOwnerAuthenticationWithCompanion = 3
    /// Biometrics or a companion. Our choice, as for policy 3: `companionNotAvailable`.
    case deviceOwnerAuthenticationWithBiometricsOrCompanion = 4
    /// watchOS only on Apple platforms; here it fails with `companionNotAvailable` (our choice).
    case deviceOwnerAuthenticationWithWristDetection = 5

    public static var deviceOwnerAuthenticationWithWatch: LAPolicy { .deviceOwnerAuthenticationWithCompanion }
    public static var deviceOwnerAuthenticationWithBiometricsOrWatch: LAPolicy {
        .deviceOwnerAuthenticationWithBiometricsOrCompanion
    }
}

public let kLAPolicyDeviceOwnerAuthenticationWithBiometrics: Int32 = 1
public let kLAPolicyDeviceOwnerAuthentication: Int32 = 2
public let kLAPolicyDeviceOwnerAuthenticationWithWatch: Int32 = 3
public let kLAPolicyDeviceOwnerAuthenticationWithCompanion: Int32 = 3
public let kLAPolicyDeviceOwnerAuthenticationWithBiometricsOrWatch: Int32 = 4
public let kLAPolicyDeviceOwnerAuthenticationWithBiometricsOrCompanion: Int32 = 4
public let kLAPolicyDeviceOwnerAuthenticationWithWristDetection: Int32 = 5

public enum LABiometryType: Int, Sendable, Hashable, CaseIterable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4

    @available(*, deprecated, renamed: "none")
    public static var LABiometryNone: LABiometryType { .none }
}

public enum LACredentialType: Int, Sendable, Hashable {
    case applicationPassword = 0
    case smartCardPIN = -3
}

public let kLACredentialTypeApplicationPassword: Int32 = 0
public let kLACredentialSmartCardPIN: Int32 = -3

public enum LAAccessControlOperation: Int, Sendable, Hashable {
    case createItem = 0
    case useItem = 1
    case createKey = 2
    case useKeySign = 3
    case useKeyDecrypt = 4
    case useKeyKeyExchange = 5
}

public enum LACompanionType: Int, Sendable, Hashable {
    case watch = 1
    case mac = 2
    case vision = 4
}

/// Five minutes: the longest `touchIDAuthenticationAllowableReuseDuration` that has an effect.
public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval = 300

/// The enrolment state of the device, as one app sees it.
public final class LADomainState: NSObject, Sendable {
    public let biometry: LADomainStateBiometry
    public let companion: LADomainStateCompanion
    /// Combined hash of biometry and companions. With no companions on Linux it equals the
    /// biometry hash (our choice).
    public var stateHash: Data? { biometry.stateHash }

    init(biometry: LADomainStateBiometry, companion: LADomainStateCompanion = LADomainStateCompanion()) {
        self.biometry = biometry
        self.companion = companion
    }
}

public final class LADomainStateBiometry: NSObject, Sendable {
    public let biometryType: LABiometryType
    /// Opaque; differs between apps; changes on every enrolment change; nil when nothing is enrolled.
    public let stateHash: Data?
    init(biometryType: LABiometryType, stateHash: Data?) {
        self.biometryType = biometryType
        self.stateHash = stateHash
    }
}

public final class LADomainStateCompanion: NSObject, Sendable {
    /// Linux has no companion devices yet: always empty.
    public let availableCompanionTypes: Set<LACompanionType> = []
    public let stateHash: Data? = nil
    public func stateHash(for companionType: LACompanionType) -> Data? { nil }
    override init() {}
}
