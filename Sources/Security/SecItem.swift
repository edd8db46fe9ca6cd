import EnclaveProtocol
import Foundation
import LocalAuthentication

// Apple's SecItem API, answered by laenclaved. Every call is synchronous, as Apple's are, and may
// show an authentication prompt (through the `LAContext` given as `kSecUseAuthenticationContext`,
// or a one-shot context).
//
// Our choices where Apple is undocumented or the platform differs (see SecItemMarshaling for the
// exact value-typing and result-shaping rules):
// - A malformed dictionary (missing or unknown kSecClass, an unsupported value type, a wrong type for
//   a kSecUse…/kSecReturn…/kSecMatch… key) fails with `errSecParam` before the daemon is asked;
//   an unsupported kSecUse…/kSecReturn…/kSecMatch… key and `kSecReturnRef` fail with `errSecUnimplemented`.
// - When laenclaved cannot be reached the status is `errSecNotAvailable`.
// - `result` is set to nil whenever the call fails.
// - Items made unusable by a change of enrolled biometrics answer `errSecInvalidItemRef`.

/// The transport; tests replace it to answer with synthetic replies.
nonisolated(unsafe) var secItemTransport: (KeychainOperation, KeychainRequest, LAContext?) -> KeychainReply = { op, request, context in
    LAContext.performKeychain(op, request, context: context)
}

func secItemPerform(_ operation: KeychainOperation, _ query: CFDictionary, changes: CFDictionary?,
                    _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    result?.pointee = nil
    let call: SecItemCall
    do {
        call = try SecItemMarshaling.call(operation, query: query, changes: changes)
    } catch {
        return error.status
    }
    let reply = secItemTransport(operation, call.request, call.context)
    let (status, object) = SecItemMarshaling.shape(reply, for: call, operation: operation)
    result?.pointee = object
    return status
}

/// Adds an item (Apple's `SecItemAdd`). `attributes` holds kSecClass, the item's attributes,
/// `kSecValueData`, optionally `kSecAttrAccessControl` or `kSecAttrAccessible` (our default when
/// neither is given: the daemon's, `kSecAttrAccessibleWhenUnlocked` as on Apple), and kSecUse… /
/// kSecReturn… keys. With return keys `result` receives the added item shaped as by
/// `SecItemCopyMatching` (never an array; kSecMatchLimit is ignored). `result` may be nil.
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    secItemPerform(.add, attributes, changes: nil, result)
}

/// Finds items (Apple's `SecItemCopyMatching`). `result` receives, for the default
/// `kSecMatchLimitOne`: `Data` with only `kSecReturnData`, the persistent ref (`Data`) with only
/// `kSecReturnPersistentRef`, and an `NSDictionary` (attribute keys as kSec strings, "v_Data",
/// "v_PersistentRef") with `kSecReturnAttributes` or several return keys; for `kSecMatchLimitAll`
/// (or a count > 1; our choice: the first count items) an `NSArray` of those. Without return keys
/// the result is nil. No match → `errSecItemNotFound`.
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    secItemPerform(.copy, query, changes: nil, result)
}

/// Changes the items matching `query` (Apple's `SecItemUpdate`). `attributesToUpdate` holds item
/// attributes only (our choice: kSecClass, kSecUse…, kSecReturn…, kSecMatch… and kSecValueRef /
/// kSecValuePersistentRef there fail with `errSecParam`); `kSecValueData` replaces the secret,
/// `kSecAttrAccessControl` (or `kSecAttrAccessible` alone, meaning no constraints) the access control.
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    secItemPerform(.update, query, changes: attributesToUpdate, nil)
}

/// Deletes the items matching `query` (Apple's `SecItemDelete`). Items made unusable by an
/// enrolment change can still be deleted.
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    secItemPerform(.delete, query, changes: nil, nil)
}

/// A human-readable message for `status` (Apple's `SecCopyErrorMessageString`); `reserved` is
/// ignored. Texts follow Apple's; `errSecInvalidItemRef` also names our use of it (an enrolment
/// change). Our choice for unknown statuses: "OSStatus <n>" rather than nil.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    NSString(string: secErrorMessage(status))
}

func secErrorMessage(_ status: OSStatus) -> String {
    switch status {
    case errSecSuccess: return "No error."
    case errSecUnimplemented: return "Function or operation not implemented."
    case errSecDiskFull: return "The disk is full."
    case errSecParam: return "One or more parameters passed to a function were not valid."
    case errSecAllocate: return "Failed to allocate memory."
    case errSecUserCanceled: return "User canceled the operation."
    case errSecNotAvailable: return "No keychain is available. The keychain daemon (laenclaved) could not be reached."
    case errSecAuthFailed: return "The user name or passphrase you entered is not correct."
    case errSecDuplicateItem: return "The specified item already exists in the keychain."
    case errSecItemNotFound: return "The specified item could not be found in the keychain."
    case errSecInvalidItemRef:
        return "The specified item is no longer valid. It may have been deleted from the keychain, or invalidated by a change of enrolled biometrics."
    case errSecInteractionNotAllowed: return "User interaction is not allowed."
    case errSecInteractionRequired: return "User interaction is required, but is currently not allowed."
    case errSecDecode: return "Unable to decode the provided data."
    case errSecMissingEntitlement: return "A required entitlement isn't present."
    case errSecVerifyFailed: return "A cryptographic verification failure has occurred."
    default: return "OSStatus \(status)"
    }
}
