import Foundation

/// The LocalAuthentication error domain, as on Apple platforms.
public let LAErrorDomain = "com.apple.LocalAuthentication"
public let kLAErrorDomain = LAErrorDomain

/// Error codes of LocalAuthentication, with Apple's raw values. Thrown by the async API and
/// passed to reply blocks; `canEvaluatePolicy` reports the same codes as `NSError`s in `LAErrorDomain`.
public struct LAError: CustomNSError, Hashable, Sendable {
    public enum Code: Int, Sendable, Hashable, CaseIterable {
        case authenticationFailed = -1
        case userCancel = -2
        case userFallback = -3
        case systemCancel = -4
        case passcodeNotSet = -5
        case touchIDNotAvailable = -6
        case touchIDNotEnrolled = -7
        case touchIDLockout = -8
        case appCancel = -9
        case invalidContext = -10
        case watchNotAvailable = -11
        case biometryNotPaired = -12
        case biometryDisconnected = -13
        case invalidDimensions = -14
        case notInteractive = -1004

        public static var biometryNotAvailable: Code { .touchIDNotAvailable }
        public static var biometryNotEnrolled: Code { .touchIDNotEnrolled }
        public static var biometryLockout: Code { .touchIDLockout }
        public static var companionNotAvailable: Code { .watchNotAvailable }
    }

    public let code: Code
    /// The human-readable explanation (our wording; Apple's varies by OS version and is not a contract).
    public let message: String

    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self.code = code
        self.message = (userInfo[NSLocalizedDescriptionKey] as? String) ?? Self.defaultMessage(code)
    }

    init(_ code: Code, message: String?) {
        self.code = code
        self.message = message ?? Self.defaultMessage(code)
    }

    public static var errorDomain: String { LAErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: message] }
    public var userInfo: [String: Any] { errorUserInfo }
    public var localizedDescription: String { message }

    public static func == (a: LAError, b: LAError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// Reads an `NSError` from `canEvaluatePolicy` back as an `LAError` (Linux has no automatic bridging).
    public init?(_ error: NSError) {
        guard error.domain == LAErrorDomain, let code = Code(rawValue: error.code) else { return nil }
        self.init(code, message: error.localizedDescription)
    }

    public static var authenticationFailed: Code { .authenticationFailed }
    public static var userCancel: Code { .userCancel }
    public static var userFallback: Code { .userFallback }
    public static var systemCancel: Code { .systemCancel }
    public static var passcodeNotSet: Code { .passcodeNotSet }
    public static var touchIDNotAvailable: Code { .touchIDNotAvailable }
    public static var touchIDNotEnrolled: Code { .touchIDNotEnrolled }
    public static var touchIDLockout: Code { .touchIDLockout }
    public static var appCancel: Code { .appCancel }
    public static var invalidContext: Code { .invalidContext }
    public static var biometryNotAvailable: Code { .touchIDNotAvailable }
    public static var biometryNotEnrolled: Code { .touchIDNotEnrolled }
    public static var biometryLockout: Code { .touchIDLockout }
    public static var notInteractive: Code { .notInteractive }
    public static var watchNotAvailable: Code { .watchNotAvailable }
    public static var companionNotAvailable: Code { .watchNotAvailable }
    public static var biometryNotPaired: Code { .biometryNotPaired }
    public static var biometryDisconnected: Code { .biometryDisconnected }
    public static var invalidDimensions: Code { .invalidDimensions }

    static func defaultMessage(_ code: Code) -> String {
        switch code {
        case .authenticationFailed: return "Application retry limit exceeded."
        case .userCancel: return "Canceled by user."
        case .userFallback: return "Fallback authentication mechanism selected."
        case .systemCancel: return "Canceled by the system."
        case .passcodeNotSet: return "Passcode not set."
        case .touchIDNotAvailable: return "Biometry is not available on this device."
        case .touchIDNotEnrolled: return "No identities are enrolled."
        case .touchIDLockout: return "Biometry is locked out."
        case .appCancel: return "Invalidated by client."
        case .invalidContext: return "Invalid context."
        case .watchNotAvailable: return "No companion device is available."
        case .biometryNotPaired: return "No biometric accessory is paired."
        case .biometryDisconnected: return "The biometric accessory is not connected."
        case .invalidDimensions: return "Invalid dimensions."
        case .notInteractive: return "User interaction is required."
        }
    }

    var nsError: NSError { NSError(domain: LAErrorDomain, code: code.rawValue, userInfo: errorUserInfo) }
}

extension LAError.Code {
    /// Lets `catch LAError.userCancel { … }` match, as on Apple platforms.
    public static func ~= (match: LAError.Code, error: any Error) -> Bool {
        if let e = error as? LAError { return e.code == match }
        let ns = error as NSError
        return ns.domain == LAErrorDomain && ns.code == match.rawValue
    }
}

// The C macros of LAPublicDefines.h, as Swift imports them.
public let kLAErrorAuthenticationFailed: Int32 = -1
public let kLAErrorUserCancel: Int32 = -2
public let kLAErrorUserFallback: Int32 = -3
public let kLAErrorSystemCancel: Int32 = -4
public let kLAErrorPasscodeNotSet: Int32 = -5
public let kLAErrorTouchIDNotAvailable: Int32 = -6
public let kLAErrorTouchIDNotEnrolled: Int32 = -7
public let kLAErrorTouchIDLockout: Int32 = -8
public let kLAErrorAppCancel: Int32 = -9
public let kLAErrorInvalidContext: Int32 = -10
public let kLAErrorBiometryNotAvailable: Int32 = -6
public let kLAErrorBiometryNotEnrolled: Int32 = -7
public let kLAErrorBiometryLockout: Int32 = -8
public let kLAErrorWatchNotAvailable: Int32 = -11
public let kLAErrorCompanionNotAvailable: Int32 = -11
public let kLAErrorBiometryNotPaired: Int32 = -12
public let kLAErrorBiometryDisconnected: Int32 = -13
public let kLAErrorInvalidDimensions: Int32 = -14
public let kLAErrorNotInteractive: Int32 = -1004

/// Linux's Foundation has no `NSErrorPointer`; this is the shape Apple's API takes (`&error`).
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?
