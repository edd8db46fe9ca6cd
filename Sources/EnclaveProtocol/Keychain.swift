import Foundation

/// A keychain attribute value as it travels: the five shapes Apple's keychain attributes take.
public enum KeychainValue: Codable, Sendable, Equatable, Hashable {
    case string(String)
    case data(Data)
    case int(Int64)
    case bool(Bool)
    case date(Date)
}

/// `SecAccessControl` on the wire: the accessibility class and the `SecAccessControlCreateFlags`.
public struct AccessControlValue: Codable, Sendable, Equatable {
    public var protection: Protection
    public var flags: AccessControlFlags
    public init(protection: Protection, flags: AccessControlFlags) {
        self.protection = protection
        self.flags = flags
    }
}

/// One SecItem call. Attribute keys are Apple's `kSec…` strings ("class", "svce", "acct", "v_Data"…).
public struct KeychainRequest: Codable, Sendable, Equatable {
    /// Item attributes (add), match attributes (copy, update, delete), including "class".
    public var attributes: [String: KeychainValue]
    /// `kSecAttrAccessControl` (add, or update's new value).
    public var accessControl: AccessControlValue?
    /// For update: the attributes to change ("v_Data" for the secret).
    public var changes: [String: KeychainValue]?
    public var changesAccessControl: AccessControlValue?
    /// `kSecUseAuthenticationContext`: the id of an `LAContext` on this connection; a one-shot id otherwise.
    public var context: String
    /// The prompt's reason (`kSecUseOperationPrompt`, else the context's `localizedReason`).
    public var reason: String?
    /// `kSecUseAuthenticationUI`; nil is `.allow`.
    public var authenticationUI: AuthenticationUI?
    public var interactionNotAllowed: Bool
    public var returnData: Bool
    public var returnAttributes: Bool
    public var returnPersistentRef: Bool
    /// `kSecMatchLimitAll`; default one.
    public var matchAll: Bool
    /// A numeric `kSecMatchLimit` above one: the daemon stops after that many items.
    public var limit: Int?
    /// `LAContext.setCredential(_, type: .applicationPassword)`.
    public var applicationPassword: Data?
    /// A prompt is drawn on the terminal this connection handed over (`EvaluationOptions.onTerminal`).
    public var onTerminal: Bool
    /// Add: the Secure Enclave key (its blob) the new item holds. The daemon deletes that key when
    /// it deletes the item, so no copy of the blob works afterwards.
    public var heldKey: Data?

    public init(
        attributes: [String: KeychainValue],
        accessControl: AccessControlValue? = nil,
        changes: [String: KeychainValue]? = nil,
        changesAccessControl: AccessControlValue? = nil,
        context: String,
        reason: String? = nil,
        authenticationUI: AuthenticationUI? = nil,
        interactionNotAllowed: Bool = false,
        returnData: Bool = false,
        returnAttributes: Bool = false,
        returnPersistentRef: Bool = false,
        matchAll: Bool = false,
        applicationPassword: Data? = nil,
        onTerminal: Bool = false,
        heldKey: Data? = nil
    ) {
        self.attributes = attributes
        self.accessControl = accessControl
        self.changes = changes
        self.changesAccessControl = changesAccessControl
        self.context = context
        self.reason = reason
        self.authenticationUI = authenticationUI
        self.interactionNotAllowed = interactionNotAllowed
        self.returnData = returnData
        self.returnAttributes = returnAttributes
        self.returnPersistentRef = returnPersistentRef
        self.matchAll = matchAll
        self.applicationPassword = applicationPassword
        self.onTerminal = onTerminal
        self.heldKey = heldKey
    }
}

public struct KeychainItem: Codable, Sendable, Equatable {
    /// Requested attributes (with "class", "pdmn", "cdat", "mdat"…); empty unless asked for.
    public var attributes: [String: KeychainValue]
    public var data: Data?
    public var persistentRef: Data?
    public init(attributes: [String: KeychainValue], data: Data?, persistentRef: Data?) {
        self.attributes = attributes
        self.data = data
        self.persistentRef = persistentRef
    }
}

/// The answer to a SecItem call: an `OSStatus` and, for copy, the matched items.
public struct KeychainReply: Codable, Sendable, Equatable {
    public var status: KeychainStatus
    public var message: String?
    public var items: [KeychainItem]
    public init(status: KeychainStatus, message: String? = nil, items: [KeychainItem] = []) {
        self.status = status
        self.message = message
        self.items = items
    }
}

public enum KeychainOperation: String, Sendable, CaseIterable {
    case add, copy, update, delete
}

extension Request {
    public static func keychain(_ operation: KeychainOperation, _ request: KeychainRequest) -> Request {
        switch operation {
        case .add: return .keychainAdd(request)
        case .copy: return .keychainCopy(request)
        case .update: return .keychainUpdate(request)
        case .delete: return .keychainDelete(request)
        }
    }
}

/// One item as `lactl keychain list` shows it: metadata only, never the secret.
public struct KeychainListing: Codable, Sendable, Equatable {
    public var app: String
    public var itemClass: String
    public var service: String?
    public var account: String?
    public var server: String?
    public var label: String?
    public var protection: Protection
    public var flags: AccessControlFlags
    public var created: Date
    public var modified: Date
    /// Names the item in `keychainRemove` and `lactl keychain delete`.
    public var persistentRef: Data
    /// Why the item cannot be used now, if it cannot.
    public var unusable: String?
    public init(
        app: String,
        itemClass: String,
        service: String?,
        account: String?,
        server: String?,
        label: String?,
        protection: Protection,
        flags: AccessControlFlags,
        created: Date,
        modified: Date,
        persistentRef: Data,
        unusable: String?
    ) {
        self.app = app
        self.itemClass = itemClass
        self.service = service
        self.account = account
        self.server = server
        self.label = label
        self.protection = protection
        self.flags = flags
        self.created = created
        self.modified = modified
        self.persistentRef = persistentRef
        self.unusable = unusable
    }
}

/// The items that hold a Secure Enclave key, as the client library stores them; named once for the
/// library and for the daemon's upgrade of items stored before `KeychainRequest.heldKey`.
public enum KeyHoldingItems {
    /// `kSecAttrTokenIDSecureEnclave`'s value: a key item whose data is the public key (65 bytes,
    /// X9.63) and then the key's blob.
    public static let secureEnclaveToken = "com.apple.setoken"
    /// The service of `LARightStore`'s items, whose `gena` attribute is a JSON record with the
    /// right's key blob under `keyBlob`.
    public static let rightStoreService = "LocalAuthentication.LARightStore"
}
