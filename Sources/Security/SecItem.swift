import EnclaveClient
import EnclaveProtocol
import Foundation

// Apple's SecItem API, answered by laenclaved. Every call is synchronous, as Apple's are, and may
// show an authentication prompt (through the `LAContext` given as `kSecUseAuthenticationContext`,
// or a one-shot context).
//
// Our choices where Apple is undocumented or the platform differs (see SecItemMarshaling for the
// exact value-typing and result-shaping rules):
// - A malformed dictionary (missing or unknown kSecClass, an unsupported value type, a wrong type for
//   a kSecUse…/kSecReturn…/kSecMatch… key) fails with `errSecParam` before the daemon is asked;
//   an unsupported kSecUse…/kSecReturn…/kSecMatch… key fails with `errSecUnimplemented`; `kSecReturnRef`
//   answers `SecKey`s for key items and asks for nothing for other classes.
// - When laenclaved cannot be reached the status is `errSecNotAvailable`.
// - `result` is set to nil whenever the call fails.
// - Items made unusable by a change of enrolled biometrics answer `errSecInvalidItemRef`.

/// The transport; tests replace it to answer with synthetic replies.
nonisolated(unsafe) var secItemTransport: (KeychainOperation, KeychainRequest, (any RequestContext)?) -> KeychainReply =
    { op, request, context in
        ContextRequests.performKeychain(op, request, context: context)
    }

func secItemPerform(
    _ operation: KeychainOperation,
    _ query: CFDictionary,
    changes: CFDictionary?,
    _ result: UnsafeMutablePointer<CFTypeRef?>?
) -> OSStatus {
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
/// ignored. Texts are Apple's (SecErrorMessages.strings, as Security's build makes it from
/// SecBase.h), except two that say what differs here: `errSecNotAvailable` names laenclaved, and
/// `errSecInvalidItemRef` also names our use of it (an enrolment change). Unknown statuses answer
/// "OSStatus <n>", as Apple's do. Our addition: while no daemon serves this process,
/// `errSecNotAvailable`'s text goes on to say why and what fixes it (`DaemonDiagnostics`).
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    NSString(string: secErrorMessage(status))
}

func secErrorMessage(_ status: OSStatus) -> String {
    let text = secErrorMessages[status] ?? "OSStatus \(status)"
    guard status == errSecNotAvailable, let problem = DaemonDiagnostics.lastUnavailability else { return text }
    return text + " " + problem.description
}
