import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB

/// A keychain item as stored: metadata in clear (for lookup and listing), the secret sealed.
struct StoredItem: Sendable, Equatable {
    var id: Int64 = 0
    var uid: UInt32
    var accessGroup: String
    var itemClass: String
    /// Empty when read without them (`attributesRead` false).
    var attributes: [String: KeychainValue]
    var protection: Protection
    var flags: AccessControlFlags
    /// The enrolment generation when the item was made (matters for `.biometryCurrentSet`).
    var enrolmentGeneration: UInt64
    var sealed: ItemSealing.Sealed
    var persistentRef: Data
    var created: Date
    var modified: Date
    /// The Secure Enclave key the item holds (`KeychainRequest.heldKey`): deleted with it.
    var heldKey: KeyHandle? = nil
    /// False when read without its attributes (`Storage.items(matching:…, readingAttributes: false)`):
    /// such an item is never written back.
    var attributesRead = true

    /// Apple's primary-key attributes per class: two items may not share them.
    static func primaryKey(class itemClass: String, _ a: [String: KeychainValue]) -> String {
        let keys: [String]
        switch itemClass {
        case "genp": keys = ["acct", "svce", "sync"]
        case "inet": keys = ["acct", "sdmn", "srvr", "ptcl", "atyp", "port", "path", "sync"]
        default: keys = ["kcls", "klbl", "atag", "type", "bsiz", "sync"]
        }
        return keys.map { k in
            // Not synchronizable is one value however it was said (absent, false, 0), as Apple's.
            if k == "sync" { return KeychainRules.isSynchronizable(a[k]) ? "sync=b:1" : "sync=" }
            return "\(k)=" + (a[k].map(Self.describe) ?? "")
        }.joined(separator: "\u{1F}")
    }

    static func describe(_ v: KeychainValue) -> String {
        switch v {
        case .string(let s): return "s:" + s
        case .data(let d): return "d:" + d.base64EncodedString()
        case .int(let i): return "i:\(i)"
        case .bool(let b): return b ? "b:1" : "b:0"
        case .date(let d): return "t:\(d.timeIntervalSince1970)"
        }
    }

    /// What the seals authenticate: the item cannot be moved to another row, app or user, and its
    /// protection cannot be weakened in the database (a changed protection needs a new seal).
    var identity: Data {
        Data(
            "\(uid)\u{1F}\(accessGroup)\u{1F}\(itemClass)\u{1F}\(protection.rawValue)\u{1F}\(flags.rawValue)\u{1F}\(enrolmentGeneration)\u{1F}"
                .utf8
        ) + persistentRef
    }

    var primaryKey: String { Self.primaryKey(class: itemClass, attributes) }

    /// Kept as a column too, for look-ups to match without reading attributes.
    var synchronizable: Bool { KeychainRules.isSynchronizable(attributes["sync"]) }

    /// What its access plan is made from.
    var protected: AccessPlan.Protected {
        AccessPlan.Protected(flags: flags, protection: protection, enrolmentGeneration: enrolmentGeneration)
    }
}
