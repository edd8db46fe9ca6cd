import Foundation

/// The LocalAuthentication error domain, as on Apple platforms.
public let LAErrorDomain = "com.apple.LocalAuthentication"
public let kLAErrorDomain = LAErrorDomain

/// Error codes of LocalAuthentication, with Apple's raw values. Thrown by the async API and
/// passed to reply blocks; `canEvaluatePolicy` reports the same codes as `NSError`s in `LAErrorDomain`.
///
/// Bridged to `NSError` as Apple's imported error structs are (`_BridgedStoredNSError`): the error
/// is stored as its `NSError`, `LAError(_nsError:)` wraps one, and `error as? LAError` turns an
/// `NSError` in `LAErrorDomain` (the one `canEvaluatePolicy` gives) back into an `LAError`.
/// Our choices: two `LAError`s are equal when their codes are (Apple compares the whole `NSError`,
/// user info included; our messages are ours); an error made from a code alone carries our
/// message as its `localizedDescription`.
///
/// Unchecked: it stores an `NSError`, which Foundation does not mark `Sendable`; ours is made once
/// and never changed.
public struct LAError: _BridgedStoredNSError, Hashable, @unchecked Sendable {
    public enum Code: Int, _ErrorCodeProtocol, Sendable, Hashable, CaseIterable {
        public typealias _ErrorType = LAError

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

    /// The error as Apple stores it: an `NSError` in `LAErrorDomain`. `_` as in Apple's interface.
    public let _nsError: NSError

    /// Wraps an `NSError` in `LAErrorDomain` with one of the codes above (a programmer error
    /// otherwise, as on Apple platforms; `error as? LAError` is the checked way).
    public init(_nsError: NSError) {
        precondition(
            _nsError.domain == LAErrorDomain && Code(rawValue: _nsError.code) != nil,
            "LAError(_nsError:) needs an NSError in \(LAErrorDomain) with an LAError code, not \(_nsError.domain) \(_nsError.code)"
        )
        self._nsError = _nsError
    }

    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        var info = userInfo
        if info[NSLocalizedDescriptionKey] == nil { info[NSLocalizedDescriptionKey] = Self.defaultMessage(code) }
        self.init(_nsError: NSError(domain: LAErrorDomain, code: code.rawValue, userInfo: info))
    }

    init(_ code: Code, message: String?) {
        self.init(code, userInfo: message.map { [NSLocalizedDescriptionKey: $0] } ?? [:])
    }

    public static var errorDomain: String { LAErrorDomain }
    public static var _nsErrorDomain: String { LAErrorDomain }
    public var code: Code { Code(rawValue: _nsError.code)! }
    /// The human-readable explanation (our wording; Apple's varies by OS version and is not a contract).
    public var message: String { _nsError.localizedDescription }

    public static func == (a: LAError, b: LAError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// Reads an `NSError` from `canEvaluatePolicy` back as an `LAError`; nil for another domain or
    /// code. Our addition; `error as? LAError` does the same.
    public init?(_ error: NSError) {
        guard error.domain == LAErrorDomain, Code(rawValue: error.code) != nil else { return nil }
        self.init(_nsError: error)
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

    var nsError: NSError { _nsError }
}

/// What makes `error as? LAError` work on an `NSError`: Linux has no Objective-C bridging, but the
/// Swift runtime casts through `_ObjectiveCBridgeable` on every platform.
extension LAError: _ObjectiveCBridgeable {
    public func _bridgeToObjectiveC() -> NSError { _nsError }

    public static func _forceBridgeFromObjectiveC(_ source: NSError, result: inout LAError?) {
        result = LAError(_nsError: source)
    }

    public static func _conditionallyBridgeFromObjectiveC(_ source: NSError, result: inout LAError?) -> Bool {
        result = LAError(source)
        return result != nil
    }

    public static func _unconditionallyBridgeFromObjectiveC(_ source: NSError?) -> LAError {
        LAError(_nsError: source ?? NSError(domain: LAErrorDomain, code: Code.systemCancel.rawValue))
    }
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
