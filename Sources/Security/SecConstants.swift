import Foundation
import EnclaveProtocol

// Apple's kSec… constants with the string values of Apple's SecItemConstants.c. Dictionaries built
// with these keys are what SecItemAdd / SecItemCopyMatching / SecItemUpdate / SecItemDelete read;
// the same strings travel to laenclaved as attribute keys.
//
// On Linux CFString is NSString, which Swift 6 cannot prove Sendable; these are immutable string
// literals, as safe to share as Apple's imported `extern const CFStringRef`s, hence nonisolated(unsafe).

// MARK: Item class

nonisolated(unsafe) public let kSecClass: CFString = "class"
nonisolated(unsafe) public let kSecClassGenericPassword: CFString = "genp"
nonisolated(unsafe) public let kSecClassInternetPassword: CFString = "inet"
nonisolated(unsafe) public let kSecClassKey: CFString = "keys"
nonisolated(unsafe) public let kSecClassCertificate: CFString = "cert"
nonisolated(unsafe) public let kSecClassIdentity: CFString = "idnt"

// MARK: Attributes

nonisolated(unsafe) public let kSecAttrService: CFString = "svce"
nonisolated(unsafe) public let kSecAttrAccount: CFString = "acct"
nonisolated(unsafe) public let kSecAttrServer: CFString = "srvr"
nonisolated(unsafe) public let kSecAttrLabel: CFString = "labl"
nonisolated(unsafe) public let kSecAttrAccessGroup: CFString = "agrp"
nonisolated(unsafe) public let kSecAttrAccessible: CFString = "pdmn"
nonisolated(unsafe) public let kSecAttrAccessControl: CFString = "accc"
nonisolated(unsafe) public let kSecAttrGeneric: CFString = "gena"
nonisolated(unsafe) public let kSecAttrComment: CFString = "icmt"
nonisolated(unsafe) public let kSecAttrDescription: CFString = "desc"
nonisolated(unsafe) public let kSecAttrCreationDate: CFString = "cdat"
nonisolated(unsafe) public let kSecAttrModificationDate: CFString = "mdat"
nonisolated(unsafe) public let kSecAttrSynchronizable: CFString = "sync"
nonisolated(unsafe) public let kSecAttrProtocol: CFString = "ptcl"
nonisolated(unsafe) public let kSecAttrPort: CFString = "port"
nonisolated(unsafe) public let kSecAttrPath: CFString = "path"
nonisolated(unsafe) public let kSecAttrSecurityDomain: CFString = "sdmn"
nonisolated(unsafe) public let kSecAttrAuthenticationType: CFString = "atyp"
nonisolated(unsafe) public let kSecAttrApplicationTag: CFString = "atag"
nonisolated(unsafe) public let kSecAttrApplicationLabel: CFString = "klbl"
nonisolated(unsafe) public let kSecAttrKeyType: CFString = "type"
nonisolated(unsafe) public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"
nonisolated(unsafe) public let kSecAttrKeySizeInBits: CFString = "bsiz"
nonisolated(unsafe) public let kSecAttrTokenID: CFString = "tkid"
nonisolated(unsafe) public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
nonisolated(unsafe) public let kSecAttrIsPermanent: CFString = "perm"
nonisolated(unsafe) public let kSecPrivateKeyAttrs: CFString = "private"

// MARK: kSecAttrAccessible values

nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
@available(*, deprecated, message: "Use an accessibility level that provides some user protection, such as kSecAttrAccessibleAfterFirstUnlock")
nonisolated(unsafe) public let kSecAttrAccessibleAlways: CFString = "dk"
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
@available(*, deprecated, message: "Use an accessibility level that provides some user protection, such as kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly")
nonisolated(unsafe) public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"
nonisolated(unsafe) public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"

// MARK: Values

nonisolated(unsafe) public let kSecValueData: CFString = "v_Data"
/// Our choice: no item in this implementation has a reference object (`SecKey`, `SecCertificate`…);
/// a query giving this key fails with `errSecParam`.
nonisolated(unsafe) public let kSecValueRef: CFString = "v_Ref"
nonisolated(unsafe) public let kSecValuePersistentRef: CFString = "v_PersistentRef"

// MARK: Return types

nonisolated(unsafe) public let kSecReturnData: CFString = "r_Data"
nonisolated(unsafe) public let kSecReturnAttributes: CFString = "r_Attributes"
/// Our choice: asking for references (`true`) fails with `errSecUnimplemented`; there are no
/// reference types in this implementation.
nonisolated(unsafe) public let kSecReturnRef: CFString = "r_Ref"
nonisolated(unsafe) public let kSecReturnPersistentRef: CFString = "r_PersistentRef"

// MARK: Match limits

nonisolated(unsafe) public let kSecMatchLimit: CFString = "m_Limit"
nonisolated(unsafe) public let kSecMatchLimitOne: CFString = "m_LimitOne"
nonisolated(unsafe) public let kSecMatchLimitAll: CFString = "m_LimitAll"

// MARK: Authentication

/// Value: an `LAContext`. Without it each call uses a one-shot context.
nonisolated(unsafe) public let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
nonisolated(unsafe) public let kSecUseAuthenticationUI: CFString = "u_AuthUI"
@available(*, deprecated, message: "Instead of kSecUseAuthenticationUI, use kSecUseAuthenticationContext and set LAContext.interactionNotAllowed")
nonisolated(unsafe) public let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
@available(*, deprecated, message: "Instead of kSecUseAuthenticationUI, use kSecUseAuthenticationContext and set LAContext.interactionNotAllowed")
nonisolated(unsafe) public let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
nonisolated(unsafe) public let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
@available(*, deprecated, message: "Use kSecUseAuthenticationContext and set LAContext.localizedReason")
nonisolated(unsafe) public let kSecUseOperationPrompt: CFString = "u_OpPrompt"
@available(*, deprecated, message: "Use kSecUseAuthenticationUI instead")
nonisolated(unsafe) public let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
/// macOS: use the data-protection keychain. Our choice: accepted and ignored — every item here
/// lives in the one (data-protection style) keychain laenclaved keeps.
nonisolated(unsafe) public let kSecUseDataProtectionKeychain: CFString = "nleg"

// MARK: OSStatus (SecBase.h): the values of EnclaveProtocol's one table

public let errSecSuccess: OSStatus = KeychainStatus.success.rawValue
public let errSecUnimplemented: OSStatus = KeychainStatus.unimplemented.rawValue
public let errSecDiskFull: OSStatus = KeychainStatus.diskFull.rawValue
public let errSecParam: OSStatus = KeychainStatus.param.rawValue
public let errSecAllocate: OSStatus = KeychainStatus.allocate.rawValue
public let errSecUserCanceled: OSStatus = KeychainStatus.userCanceled.rawValue
public let errSecNotAvailable: OSStatus = KeychainStatus.notAvailable.rawValue
public let errSecAuthFailed: OSStatus = KeychainStatus.authFailed.rawValue
public let errSecDuplicateItem: OSStatus = KeychainStatus.duplicateItem.rawValue
public let errSecItemNotFound: OSStatus = KeychainStatus.itemNotFound.rawValue
/// Our documented answer for an item made permanently unusable by a change of enrolled biometrics
/// (`.biometryCurrentSet`); Apple's exact status in that case is not documented.
public let errSecInvalidItemRef: OSStatus = KeychainStatus.invalidItemRef.rawValue
public let errSecInteractionNotAllowed: OSStatus = KeychainStatus.interactionNotAllowed.rawValue
public let errSecInteractionRequired: OSStatus = KeychainStatus.interactionRequired.rawValue
public let errSecDecode: OSStatus = KeychainStatus.decode.rawValue
public let errSecMissingEntitlement: OSStatus = KeychainStatus.missingEntitlement.rawValue
public let errSecVerifyFailed: OSStatus = KeychainStatus.verifyFailed.rawValue
