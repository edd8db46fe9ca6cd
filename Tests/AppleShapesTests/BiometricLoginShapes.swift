import Foundation
import LocalAuthentication

// App code in the shapes of Apple's "Accessing keychain items with Face ID or Touch ID" and
// "Logging a user into your app with Face ID or Touch ID": an internet password behind
// biometry, read with an LAContext, and the policy checks. Only LocalAuthentication is imported —
// as on Apple platforms it brings Security's names. The reply closures set captured variables,
// which Apple's imported (non-Sendable) blocks allow.

struct Credentials {
    var username: String
    var password: String
}

enum LoginError: Error {
    case noPassword
    case unexpectedPasswordData
    case unhandledError(status: OSStatus)
}

let server = "www.example.com"

func addCredentials(_ credentials: Credentials, server: String) throws {
    let access = SecAccessControlCreateWithFlags(
        nil,
        kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
        .biometryCurrentSet,
        nil
    )
    let context = LAContext()
    context.touchIDAuthenticationAllowableReuseDuration = 10
    let account = credentials.username
    let password = credentials.password.data(using: String.Encoding.utf8)!
    let query: [String: Any] = [
        kSecClass as String: kSecClassInternetPassword,
        kSecAttrAccount as String: account,
        kSecAttrServer as String: server,
        kSecAttrAccessControl as String: access as Any,
        kSecUseAuthenticationContext as String: context,
        kSecValueData as String: password,
    ]
    let status = SecItemAdd(query as CFDictionary, nil)
    guard status == errSecSuccess else { throw LoginError.unhandledError(status: status) }
}

func readCredentials(server: String) throws -> Credentials {
    let context = LAContext()
    context.localizedReason = "Access your password on the keychain"
    let query: [String: Any] = [
        kSecClass as String: kSecClassInternetPassword,
        kSecAttrServer as String: server,
        kSecMatchLimit as String: kSecMatchLimitOne,
        kSecReturnAttributes as String: true,
        kSecUseAuthenticationContext as String: context,
        kSecReturnData as String: true,
    ]
    var item: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &item)
    guard status == errSecSuccess else { throw LoginError.unhandledError(status: status) }
    guard let existingItem = item as? [String: Any],
        let passwordData = existingItem[kSecValueData as String] as? Data,
        let password = String(data: passwordData, encoding: String.Encoding.utf8),
        let account = existingItem[kSecAttrAccount as String] as? String
    else { throw LoginError.unexpectedPasswordData }
    return Credentials(username: account, password: password)
}

func deleteCredentials(server: String) -> OSStatus {
    SecItemDelete([kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: server] as CFDictionary)
}

/// What the login screen shows: the biometry kind, or why there is none.
func biometryStatus() -> String {
    let context = LAContext()
    var error: NSError?
    if context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error) {
        switch context.biometryType {
        case .touchID: return "Touch ID"
        case .faceID: return "Face ID"
        case .opticID: return "Optic ID"
        default: return "biometry"
        }
    }
    if let laError = error as? LAError {
        switch laError.code {
        case .biometryNotEnrolled: return "not enrolled"
        case .biometryLockout: return "locked out"
        case .biometryNotAvailable: return "not available"
        default: return "error \(laError.code.rawValue)"
        }
    }
    return "unknown"
}

/// A synchronous helper apps write around the reply-block API: the reply sets captured variables.
func authenticateAndWait(reason: String) -> (Bool, Error?) {
    let context = LAContext()
    var succeeded = false
    var failure: Error?
    let done = DispatchSemaphore(value: 0)
    context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: reason) { success, error in
        succeeded = success
        failure = error
        done.signal()
    }
    done.wait()
    return (succeeded, failure)
}
