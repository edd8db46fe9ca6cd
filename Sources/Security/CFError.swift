import Foundation

// CoreFoundation's error calls as wrappers use them on what SecKey functions hand back. On Linux a
// CFError is an NSError, so these read the NSError.

/// Apple's `kCFErrorDomainOSStatus`: the domain of every error the SecKey functions report, with
/// the `OSStatus` as the code.
nonisolated(unsafe) public let kCFErrorDomainOSStatus: CFString = "NSOSStatusErrorDomain"

public typealias CFErrorDomain = CFString

public func CFErrorGetCode(_ err: CFError) -> CFIndex { err.code }
public func CFErrorGetDomain(_ err: CFError) -> CFErrorDomain! { NSString(string: err.domain) }
public func CFErrorCopyUserInfo(_ err: CFError) -> CFDictionary! {
    NSDictionary(dictionary: err.userInfo)
}
public func CFErrorCopyDescription(_ err: CFError) -> CFString! { NSString(string: err.localizedDescription) }
public func CFErrorCopyFailureReason(_ err: CFError) -> CFString? {
    err.localizedFailureReason.map { NSString(string: $0) }
}
public func CFErrorCopyRecoverySuggestion(_ err: CFError) -> CFString? {
    err.localizedRecoverySuggestion.map { NSString(string: $0) }
}

/// A failure of a Security call as Apple reports it: an `OSStatus` in `NSOSStatusErrorDomain` with
/// our explanation as its description; the module's one error type (a SecItem dictionary refused
/// before it reaches the daemon is one too).
struct SecFailure: Error {
    let status: OSStatus
    let message: String
    /// What the authentication said, when a prompt ended the call (an `LAError` in
    /// LocalAuthentication's domain): `NSUnderlyingErrorKey`, as on Apple platforms.
    let underlying: NSError?

    init(_ status: OSStatus, _ message: String, underlying: NSError? = nil) {
        self.status = status
        self.message = message
        self.underlying = underlying
    }

    var cfError: CFError {
        var info: [String: Any] = [NSLocalizedDescriptionKey: message]
        if let underlying { info[NSUnderlyingErrorKey] = underlying }
        return NSError(domain: NSOSStatusErrorDomain, code: Int(status), userInfo: info)
    }

    /// Hands the error to a caller's `&error` (retained, as Apple's `Unmanaged<CFError>` out-parameters are).
    func report(to error: UnsafeMutablePointer<Unmanaged<CFError>?>?) {
        error?.pointee = Unmanaged.passRetained(cfError)
    }
}

/// Runs `body`, handing a `SecFailure` to `out` and answering nil: the shape of every SecKey call.
func secKeyCall<T>(_ out: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ body: () throws(SecFailure) -> T) -> T? {
    do {
        return try body()
    } catch {
        error.report(to: out)
        return nil
    }
}

nonisolated(unsafe) public let kCFErrorDomainPOSIX: CFErrorDomain! = "NSPOSIXErrorDomain"
nonisolated(unsafe) public let kCFErrorDomainCocoa: CFErrorDomain! = "NSCocoaErrorDomain"
nonisolated(unsafe) public let kCFErrorDescriptionKey: CFString! = "NSDescription"
nonisolated(unsafe) public let kCFErrorLocalizedDescriptionKey: CFString! = "NSLocalizedDescription"
nonisolated(unsafe) public let kCFErrorLocalizedFailureReasonKey: CFString! = "NSLocalizedFailureReason"
nonisolated(unsafe) public let kCFErrorUnderlyingErrorKey: CFString! = "NSUnderlyingError"

public func CFErrorCreate(
    _ allocator: CFAllocator!,
    _ domain: CFErrorDomain!,
    _ code: CFIndex,
    _ userInfo: CFDictionary!
) -> CFError! {
    var info: [String: Any] = [:]
    for (k, v) in (userInfo ?? NSDictionary()) { if let key = k as? String { info[key] = v } }
    return NSError(domain: domain as String, code: code, userInfo: info)
}
