import Foundation
import EnclaveProtocol

// Apple's kSec… constants with the string values of Apple's SecItemConstants.c. Dictionaries built
// with these keys are what SecItemAdd / SecItemCopyMatching / SecItemUpdate / SecItemDelete read;
// the same strings travel to laenclaved as attribute keys.

// MARK: Item class

public let kSecClass: CFString = "class"
public let kSecClassGenericPassword: CFString = "genp"
public let kSecClassInternetPassword: CFString = "inet"
public let kSecClassKey: CFString = "keys"
public let kSecClassCertificate: CFString = "cert"
public let kSecClassIdentity: CFString = "idnt"

// MARK: Attributes

public let kSecAttrService: CFString = "svce"
public let kSecAttrAccount: CFString = "acct"
public let kSecAttrServer: CFString = "srvr"
public let kSecAttrLabel: CFString = "labl"
public let kSecAttrAccessGroup: CFString = "agrp"
public let kSecAttrAccessible: CFString = "pdmn"
public let kSecAttrAccessControl: CFString = "accc"
public let kSecAttrGeneric: CFString = "gena"
public let kSecAttrComment: CFString = "icmt"
public let kSecAttrDescription: CFString = "desc"
public let kSecAttrCreationDate: CFString = "cdat"
public let kSecAttrModificationDate: CFString = "mdat"
public let kSecAttrSynchronizable: CFString = "sync"
public let kSecAttrProtocol: CFString = "ptcl"
public let kSecAttrPort: CFString = "port"
public let kSecAttrPath: CFString = "path"
public let kSecAttrSecurityDomain: CFString = "sdmn"
public let kSecAttrAuthenticationType: CFString = "atyp"
public let kSecAttrApplicationTag: CFString = "atag"
public let kSecAttrApplicationLabel: CFString = "klbl"
public let kSecAttrKeyType: CFString = "type"
public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"
public let kSecAttrKeySizeInBits: CFString = "bsiz"
public let kSecAttrTokenID: CFString = "tkid"
public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
public let kSecAttrIsPermanent: CFString = "perm"
public let kSecPrivateKeyAttrs: CFString = "private"

// MARK: kSecAttrAccessible values

public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
@available(*, deprecated, message: "Use an accessibility level that provides some user protection, such as kSecAttrAccessibleAfterFirstUnlock")
public let kSecAttrAccessibleAlways: CFString = "dk"
public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
@available(*, deprecated, message: "Use an accessibility level that provides some user protection, such as kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly")
public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"
public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"

// MARK: Values

public let kSecValueData: CFString = "v_Data"
/// Our choice: no item in this implementation has a reference object (`SecKey`, `SecCertificate`…);
/// a query giving this key fails with `errSecParam`.
public let kSecValueRef: CFString = "v_Ref"
public let kSecValuePersistentRef: CFString = "v_PersistentRef"

// MARK: Return types

public let kSecReturnData: CFString = "r_Data"
public let kSecReturnAttributes: CFString = "r_Attributes"
/// Our choice: asking for references (`true`) fails with `errSecUnimplemented`; there are no
/// reference types in this implementation.
public let kSecReturnRef: CFString = "r_Ref"
public let kSecReturnPersistentRef: CFString = "r_PersistentRef"

// MARK: Match limits

public let kSecMatchLimit: CFString = "m_Limit"
public let kSecMatchLimitOne: CFString = "m_LimitOne"
public let kSecMatchLimitAll: CFString = "m_LimitAll"

// MARK: Authentication

/// Value: an `LAContext`. Without it each call uses a one-shot context.
public let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
public let kSecUseAuthenticationUI: CFString = "u_AuthUI"
@available(*, deprecated, message: "Instead of kSecUseAuthenticationUI, use kSecUseAuthenticationContext and set LAContext.interactionNotAllowed")
public let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
@available(*, deprecated, message: "Instead of kSecUseAuthenticationUI, use kSecUseAuthenticationContext and set LAContext.interactionNotAllowed")
public let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
public let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
@available(*, deprecated, message: "Use kSecUseAuthenticationContext and set LAContext.localizedReason")
public let kSecUseOperationPrompt: CFString = "u_OpPrompt"
@available(*, deprecated, message: "Use kSecUseAuthenticationUI instead")
public let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
/// macOS: use the data-protection keychain. Our choice: accepted and ignored — every item here
/// lives in the one (data-protection style) keychain laenclaved keeps.
public let kSecUseDataProtectionKeychain: CFString = "nleg"

// MARK: OSStatus (SecBase.h): the values of EnclaveProtocol's one table

public let errSecSuccess: OSStatus = KeychainStatus.success.rawValue
public let errSecUnimplemented: OSStatus = KeychainStatus.unimplemented.rawValue
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
