import EnclaveProtocol
import Foundation

/// A keychain call that ends with an `OSStatus` other than success, and why in words.
public struct KeychainFailure: Error, Equatable, CustomStringConvertible {
    public var status: KeychainStatus
    public var message: String
    public init(_ status: KeychainStatus, _ message: String) {
        self.status = status
        self.message = message
    }
    public var description: String { "\(status): \(message)" }
}

/// Why an item or key cannot be made with the protection asked for, given the user's state now.
/// Shared by `SecItemAdd`, `SecItemUpdate`'s new access control, and Secure Enclave key creation;
/// each surface maps it to its own answer.
public enum CreationProblem: Sendable, Equatable, CustomStringConvertible {
    case passcodeNeeded, enrolmentNeeded, applicationPasswordNeeded

    public var description: String {
        switch self {
        case .passcodeNeeded: return "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly needs a device passcode"
        case .enrolmentNeeded: return "biometryCurrentSet needs at least one enrolled identity"
        case .applicationPasswordNeeded:
            return "applicationPassword needs LAContext.setCredential(_:type: .applicationPassword)"
        }
    }

    /// The first rule a new protection breaks, or nil.
    public static func check(
        protection: Protection,
        requirement: AccessRequirement,
        passcodeSet: Bool,
        enrolled: Bool,
        applicationPasswordGiven: Bool
    ) -> CreationProblem? {
        if protection == .whenPasscodeSetThisDeviceOnly && !passcodeSet { return .passcodeNeeded }
        if requirement.currentSet && !enrolled { return .enrolmentNeeded }
        if requirement.applicationPassword && !applicationPasswordGiven { return .applicationPasswordNeeded }
        return nil
    }
}

/// The keychain's rules on a call's dictionaries, no I/O: which classes and attributes exist, what
/// an add or update may carry, and which stored items a query matches. The shell reads and writes
/// storage and proves access control; these say what is allowed.
public enum KeychainRules {
    public static let itemClasses: Set<String> = ["genp", "inet", "keys"]
    /// Attributes stored and matched; anything else in a request is refused with errSecParam.
    public static let itemAttributes: Set<String> = [
        "class", "svce", "acct", "srvr", "labl", "agrp", "pdmn", "gena", "icmt", "desc", "sync", "ptcl", "port", "path",
        "sdmn",
        "atyp", "crtr", "type", "invi", "nega", "atag", "klbl", "kcls", "bsiz", "perm", "tkid", "cdat", "mdat",
    ]
    /// Keys that carry the value, not an attribute.
    public static let valueKeys: Set<String> = ["v_Data", "v_PersistentRef"]
    /// Attributes the keychain keeps itself: a caller cannot change them.
    static let keptByKeychain = ["pdmn", "cdat", "mdat"]
    public static let maxAttributeBytes = 4096

    /// The query's or item's class.
    public static func itemClass(_ a: [String: KeychainValue]) throws(KeychainFailure) -> String {
        guard case .string(let c)? = a["class"] else {
            throw KeychainFailure(.param, "kSecClass is missing or not a string")
        }
        if c == "cert" || c == "idnt" {
            throw KeychainFailure(.unimplemented, "certificates and identities are not supported yet")
        }
        guard itemClasses.contains(c) else { throw KeychainFailure(.param, "unknown kSecClass \"\(c.prefix(32))\"") }
        return c
    }

    public static func checkKeys(_ a: [String: KeychainValue]) throws(KeychainFailure) {
        for key in a.keys where !itemAttributes.contains(key) && !valueKeys.contains(key) {
            throw KeychainFailure(.param, "unsupported attribute \"\(key.prefix(32))\"")
        }
    }

    /// A query's persistent reference, if it names one.
    public static func persistentRef(_ query: [String: KeychainValue]) throws(KeychainFailure) -> Data? {
        guard let ref = query["v_PersistentRef"] else { return nil }
        guard case .data(let d) = ref else { throw KeychainFailure(.param, "kSecValuePersistentRef must be data") }
        return d
    }

    public static func string(_ a: [String: KeychainValue], _ key: String) -> String? {
        if case .string(let v)? = a[key] { return v }
        return nil
    }

    static let synchronizableAny = KeychainValue.string("syna")

    /// A query split by where it is matched: the storage's columns (class, service, account,
    /// server, access group, persistent reference, whether synchronizable) and an item's stored
    /// attributes (the rest). A look-up whose query leaves nothing to the attributes, and that
    /// returns none, needs no item's attributes read. Only string values go to the columns (a
    /// service given as data is matched on the attributes). `sync` as Apple reads it: a query
    /// without it (or false) finds only items that are not synchronizable, true only those that
    /// are, `kSecAttrSynchronizableAny` ("syna") both.
    public struct IndexedQuery: Equatable, Sendable {
        public let itemClass: String
        public let service: String?
        public let account: String?
        public let server: String?
        /// The one access group asked for; the storage searches it only if the app may.
        public let accessGroup: String?
        public let persistentRef: Data?
        /// Whether the items found are synchronizable; nil for either (`kSecAttrSynchronizableAny`).
        public let synchronizable: Bool?
        /// What an item's attributes must hold, each equal, after the columns matched.
        public let remaining: [String: KeychainValue]

        public init(_ query: [String: KeychainValue]) throws(KeychainFailure) {
            try checkKeys(query)
            itemClass = try KeychainRules.itemClass(query)
            persistentRef = try KeychainRules.persistentRef(query)
            service = string(query, "svce")
            account = string(query, "acct")
            server = string(query, "srvr")
            accessGroup = string(query, "agrp")
            synchronizable = query["sync"] == synchronizableAny ? nil : isTrue(query["sync"])
            var remaining = query
            for key in valueKeys.union(["class", "sync"]) { remaining[key] = nil }
            for key in ["svce", "acct", "srvr", "agrp"] where string(query, key) != nil { remaining[key] = nil }
            self.remaining = remaining
        }

        /// Whether an item the columns found matches on its attributes too.
        public func remainingMatch(_ attributes: [String: KeychainValue]) -> Bool {
            remaining.allSatisfy { key, value in attributes[key] == value }
        }

        /// The whole rule on an item's attributes: each column as the storage writes it from the
        /// attributes, then `remainingMatch`. (The persistent reference is a column only: this
        /// leaves it to the storage.) `KeychainStoreTests` holds the storage's SQL to it.
        public func matches(_ attributes: [String: KeychainValue]) -> Bool {
            let columns: [(String, String?)] = [
                ("class", itemClass), ("svce", service), ("acct", account), ("srvr", server), ("agrp", accessGroup),
            ]
            return columns.allSatisfy { key, asked in asked == nil || string(attributes, key) == asked }
                && (synchronizable.map { $0 == isSynchronizable(attributes["sync"]) } ?? true)
                && remainingMatch(attributes)
        }
    }

    /// Whether a stored `sync` says synchronizable: absent, false and 0 are one value.
    public static func isSynchronizable(_ v: KeychainValue?) -> Bool { isTrue(v) }

    private static func isTrue(_ v: KeychainValue?) -> Bool {
        switch v {
        case .bool(let b)?: return b
        case .int(let i)?: return i != 0
        default: return false
        }
    }

    /// What `SecItemAdd` asks to store, checked.
    public struct NewItem: Equatable, Sendable {
        public var itemClass: String
        /// The attributes to store, without the value keys; the shell adds the access group and dates.
        public var attributes: [String: KeychainValue]
        public var protection: Protection
        public var flags: AccessControlFlags
        public var requirement: AccessRequirement
        public var secret: Data
    }

    /// Checks an add's dictionary and access control: classes, attribute names and sizes, the
    /// protection (`kSecAttrAccessControl`'s, else `kSecAttrAccessible`, else `…WhenUnlocked`).
    public static func newItem(
        _ a: [String: KeychainValue],
        accessControl: AccessControlValue?
    ) throws(KeychainFailure) -> NewItem {
        try checkKeys(a)
        let itemClass = try itemClass(a)
        let protection: Protection
        if let ac = accessControl {
            protection = ac.protection
        } else if let value = a["pdmn"] {
            guard case .string(let name) = value, let p = Protection(rawValue: name) else {
                throw KeychainFailure(.param, "unknown kSecAttrAccessible value \(describe(value))")
            }
            protection = p
        } else {
            protection = .whenUnlocked
        }
        let flags = accessControl?.flags ?? []
        let requirement: AccessRequirement
        do { requirement = try AccessRequirement(flags: flags) } catch { throw KeychainFailure(.param, "\(error)") }
        try checkSynchronizable(a, protection: protection)
        try checkSizes(a)
        var secret = Data()
        if let value = a["v_Data"] {
            guard case .data(let d) = value else { throw KeychainFailure(.param, "kSecValueData must be data") }
            secret = d
        }
        return NewItem(
            itemClass: itemClass,
            attributes: a.filter { !valueKeys.contains($0.key) },
            protection: protection,
            flags: flags,
            requirement: requirement,
            secret: secret
        )
    }

    /// What `SecItemUpdate` asks to change, checked.
    public struct Changes: Equatable, Sendable {
        /// Attributes to set, without the value keys.
        public var attributes: [String: KeychainValue]
        public var secret: Data?
        public var accessControl: AccessControlValue?
        public var requirement: AccessRequirement?
    }

    public static func changes(
        _ changes: [String: KeychainValue],
        accessControl: AccessControlValue?
    ) throws(KeychainFailure) -> Changes {
        try checkKeys(changes)
        if changes["class"] != nil { throw KeychainFailure(.param, "kSecClass cannot be changed") }
        for key in keptByKeychain where changes[key] != nil {
            throw KeychainFailure(
                .param,
                "\(key) is kept by the keychain; change the protection with kSecAttrAccessControl or kSecAttrAccessible"
            )
        }
        if changes["agrp"] != nil { throw KeychainFailure(.param, "an item cannot move to another access group") }
        if changes["v_PersistentRef"] != nil {
            throw KeychainFailure(.param, "kSecValuePersistentRef cannot be changed")
        }
        try checkSizes(changes)
        var secret: Data?
        if let value = changes["v_Data"] {
            guard case .data(let d) = value else { throw KeychainFailure(.param, "kSecValueData must be data") }
            secret = d
        }
        var requirement: AccessRequirement?
        if let ac = accessControl {
            do { requirement = try AccessRequirement(flags: ac.flags) } catch {
                throw KeychainFailure(.param, "\(error)")
            }
        }
        return Changes(
            attributes: changes.filter { !valueKeys.contains($0.key) },
            secret: secret,
            accessControl: accessControl,
            requirement: requirement
        )
    }

    /// A synchronizable item cannot be bound to this device.
    public static func checkSynchronizable(_ a: [String: KeychainValue], protection: Protection) throws(KeychainFailure)
    {
        if a["sync"] == synchronizableAny {
            throw KeychainFailure(.param, "kSecAttrSynchronizableAny is for queries; an item is synchronizable or not")
        }
        if isTrue(a["sync"]), protection.isThisDeviceOnly {
            throw KeychainFailure(.param, "a synchronizable item cannot be …ThisDeviceOnly")
        }
    }

    static func checkSizes(_ a: [String: KeychainValue]) throws(KeychainFailure) {
        for (key, value) in a where key != "v_Data" {
            if case .string(let text) = value, text.utf8.count > maxAttributeBytes {
                throw KeychainFailure(.param, "attribute \(key) is longer than 4 KiB")
            }
            if case .data(let bytes) = value, bytes.count > maxAttributeBytes {
                throw KeychainFailure(.param, "attribute \(key) is larger than 4 KiB")
            }
        }
    }

    /// A value as an error message may quote it.
    public static func describe(_ v: KeychainValue) -> String {
        if case .string(let s) = v { return "\"\(s.prefix(64))\"" }
        return "(not a string)"
    }
}

extension KeychainFailure {
    public init(_ problem: CreationProblem) { self.init(.authFailed, problem.description) }
}
