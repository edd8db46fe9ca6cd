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
public func CFErrorCopyFailureReason(_ err: CFError) -> CFString? { err.localizedFailureReason.map { NSString(string: $0) } }
public func CFErrorCopyRecoverySuggestion(_ err: CFError) -> CFString? { err.localizedRecoverySuggestion.map { NSString(string: $0) } }

/// A failure of a Security call as Apple reports it: an `OSStatus` in `NSOSStatusErrorDomain` with
/// our explanation as its description.
struct SecFailure: Error {
    let status: OSStatus
    let message: String

    init(_ status: OSStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    var cfError: CFError {
        NSError(domain: NSOSStatusErrorDomain, code: Int(status), userInfo: [NSLocalizedDescriptionKey: message])
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
