import EnclaveClient
import EnclaveProtocol
import Foundation

/// A SecItem dictionary turned into what the daemon needs, plus what only the client uses.
struct SecItemCall {
    var request: KeychainRequest
    /// `kSecUseAuthenticationContext`; nil → `performKeychain` makes a one-shot context.
    var context: (any RequestContext)?
    /// `kSecMatchLimit`: nil = one (the default), `.max` = all, n = at most n (an array).
    var limit: Int?
    /// `kSecReturnRef` on key items: the daemon is asked for data and attributes, and the
    /// result carries `SecKey`s; `shown` is what the caller asked to see beside the reference.
    var returnRef = false
    var shown = (data: false, attributes: false)
    var returnsArray: Bool { limit != nil && limit != 1 }
    var wantsResult: Bool { returnRef || request.returnData || request.returnAttributes || request.returnPersistentRef }
}

/// Pure conversion between Apple's SecItem dictionaries and the wire types. No I/O.
///
/// Value typing (our rules):
/// - `String`/`NSString` → `.string`; `Data`/`NSData` → `.data`; `Date`/`NSDate` → `.date`.
/// - A Swift `Bool`, or an `NSNumber` holding a boolean (`kCFBooleanTrue`/`False`, objCType "c" or "B")
///   → `.bool`; any other integer `NSNumber` → `.int`; a floating `NSNumber` with an integral value →
///   `.int`, otherwise rejected.
/// - Anything else (arrays, dictionaries, `NSNull`, other objects) → `errSecParam`, without calling
///   the daemon. `kSecAttrAccessControl` must be a `SecAccessControl`, `kSecUseAuthenticationContext`
///   an `LAContext`, `kSecValueData`/`kSecValuePersistentRef` `Data`.
enum SecItemMarshaling {
    enum Role { case add, query, changes }

    static let itemClasses: Set<String> = ["genp", "inet", "keys", "cert", "idnt"]

    // MARK: Values

    static func value(_ v: Any) -> KeychainValue? {
        if let s = v as? String { return .string(s) }
        if let d = v as? Data { return .data(d) }
        if let d = v as? Date { return .date(d) }
        if type(of: v) == Bool.self, let b = v as? Bool { return .bool(b) }
        if let n = v as? NSNumber {
            let t = String(cString: n.objCType)
            if t == "c" || t == "B" { return .bool(n.boolValue) }
            if t == "f" || t == "d" {
                let x = n.doubleValue
                guard x.rounded() == x, let i = Int64(exactly: x) else { return nil }
                return .int(i)
            }
            if t == "Q" || t == "L" || t == "I" || t == "S" || t == "C" {
                guard let i = Int64(exactly: n.uint64Value) else { return nil }
                return .int(i)
            }
            return .int(n.int64Value)
        }
        switch v {
        case let i as Int: return .int(Int64(i))
        case let i as Int64: return .int(i)
        case let i as Int32: return .int(Int64(i))
        case let i as UInt: return Int64(exactly: i).map { .int($0) }
        default: return nil
        }
    }

    /// The Swift/Foundation object Apple hands back for a wire value.
    static func object(_ v: KeychainValue) -> AnyObject {
        switch v {
        case .string(let s): return NSString(string: s)
        case .data(let d): return NSData(data: d)
        case .int(let i): return NSNumber(value: i)
        case .bool(let b): return NSNumber(value: b)
        case .date(let d): return NSDate(timeIntervalSinceReferenceDate: d.timeIntervalSinceReferenceDate)
        }
    }

    static func bool(_ v: Any, _ key: String) throws(SecFailure) -> Bool {
        if case .bool(let b)? = value(v) { return b }
        if case .int(let i)? = value(v) { return i != 0 }
        throw SecFailure(errSecParam, "\(key) must be a boolean")
    }

    // MARK: Dictionaries

    static func entries(_ dict: CFDictionary) throws(SecFailure) -> [String: Any] {
        var out: [String: Any] = [:]
        for (k, v) in dict {
            guard let key = k as? String else {
                throw SecFailure(errSecParam, "dictionary key \(k) is not a string")
            }
            out[key] = v
        }
        return out
    }

    /// Builds the call for `operation`. `changes` is SecItemUpdate's `attributesToUpdate`.
    static func call(
        _ operation: KeychainOperation,
        query: CFDictionary,
        changes: CFDictionary? = nil
    ) throws(SecFailure) -> SecItemCall {
        let q = try entries(query)
        var call = SecItemCall(request: KeychainRequest(attributes: [:], context: ""), context: nil, limit: nil)
        // A key given as kSecValueRef says its class.
        let cls: Any
        if let c = q["class"] {
            cls = c
        } else if q["v_Ref"] is SecKey {
            cls = "keys"
            call.request.attributes["class"] = .string("keys")
        } else {
            throw SecFailure(errSecParam, "kSecClass is missing")
        }
        guard let clsName = cls as? String, itemClasses.contains(clsName) else {
            throw SecFailure(errSecParam, "kSecClass \(cls) is not an item class")
        }
        var noAuthUI = false
        var accessible: Protection?
        for (key, v) in q {
            switch key {
            case "u_AuthCtx":
                guard let c = v as? any RequestContext else {
                    throw SecFailure(errSecParam, "kSecUseAuthenticationContext must be an LAContext")
                }
                call.context = c
            case "u_AuthUI":
                guard let s = v as? String, let mode = AuthenticationUI(rawValue: s) else {
                    throw SecFailure(
                        errSecParam,
                        "kSecUseAuthenticationUI must be kSecUseAuthenticationUIAllow, …Fail or …Skip"
                    )
                }
                if mode == .skip && operation != .copy {
                    throw SecFailure(
                        errSecParam,
                        "kSecUseAuthenticationUISkip is only valid with SecItemCopyMatching"
                    )
                }
                call.request.authenticationUI = mode
            case "u_OpPrompt":
                guard let s = v as? String else {
                    throw SecFailure(errSecParam, "kSecUseOperationPrompt must be a string")
                }
                call.request.reason = s
            case "u_NoAuthUI":
                noAuthUI = try bool(v, key)
            case "nleg":
                _ = try bool(v, key)
            case "r_Data": call.request.returnData = try bool(v, key)
            case "r_Attributes": call.request.returnAttributes = try bool(v, key)
            case "r_PersistentRef": call.request.returnPersistentRef = try bool(v, key)
            case "r_Ref":
                call.returnRef = try bool(v, key)
            case "m_Limit":
                call.limit = try limit(v)
            case "accc":
                guard let ac = v as? SecAccessControl else {
                    throw SecFailure(errSecParam, "kSecAttrAccessControl must be a SecAccessControl")
                }
                call.request.accessControl = ac.wireValue
            case "pdmn":
                guard let s = v as? String, let p = Protection(rawValue: s) else {
                    throw SecFailure(errSecParam, "kSecAttrAccessible must be a kSecAttrAccessible value")
                }
                if operation == .add { accessible = p } else { call.request.attributes[key] = .string(s) }
            case "v_Ref":
                guard let secKey = v as? SecKey else {
                    throw SecFailure(errSecParam, "kSecValueRef must be a SecKey (no other reference types here)")
                }
                guard clsName == "keys" else {
                    throw SecFailure(errSecParam, "a SecKey kSecValueRef needs kSecClassKey")
                }
                if operation == .add {
                    for (k, kv) in secKey.keyAttributes where call.request.attributes[k] == nil {
                        call.request.attributes[k] = kv
                    }
                    call.request.attributes["v_Data"] = .data(secKey.itemData)
                    call.request.heldKey = secKey.heldKey
                } else {
                    call.request.attributes["klbl"] = .data(secKey.applicationLabel)
                    call.request.attributes["kcls"] = .string(secKey.isPrivate ? "1" : "0")
                }
            case "v_Data", "v_PersistentRef":
                guard let d = v as? Data else { throw SecFailure(errSecParam, "\(key) must be Data") }
                call.request.attributes[key] = .data(d)
            default:
                if key.hasPrefix("u_") || key.hasPrefix("r_") || key.hasPrefix("m_") {
                    throw SecFailure(errSecUnimplemented, "query key \(key) is not supported")
                }
                guard let kv = value(v) else {
                    throw SecFailure(errSecParam, "unsupported value type \(type(of: v)) for \(key)")
                }
                call.request.attributes[key] = kv
            }
        }
        if noAuthUI && call.request.authenticationUI == nil { call.request.authenticationUI = .fail }
        // Only key items have reference objects; for other classes kSecReturnRef asks for nothing.
        if call.returnRef && clsName != "keys" { call.returnRef = false }
        if call.returnRef {
            call.shown = (call.request.returnData, call.request.returnAttributes)
            call.request.returnData = true
            call.request.returnAttributes = true
        }
        call.request.accessControl = try combine(call.request.accessControl, accessible)
        if let changes {
            let (attrs, ac) = try changeSet(entries(changes))
            call.request.changes = attrs
            call.request.changesAccessControl = ac
        }
        if operation != .copy && operation != .add {
            // Return keys and limits mean nothing for update and delete.
            call.limit = nil
            call.returnRef = false
            call.request.returnData = false
            call.request.returnAttributes = false
            call.request.returnPersistentRef = false
        }
        if operation == .add { call.limit = nil }
        call.request.matchAll = call.returnsArray
        // A count limit goes to the daemon too: it stops (and prompts) no further than that.
        call.request.limit = call.limit.flatMap { $0 == .max ? nil : $0 }
        return call
    }

    /// `kSecMatchLimit`: `kSecMatchLimitOne`, `kSecMatchLimitAll`, or a positive count.
    static func limit(_ v: Any) throws(SecFailure) -> Int? {
        if let s = v as? String {
            if s == "m_LimitOne" { return nil }
            if s == "m_LimitAll" { return .max }
        } else if case .int(let n)? = value(v), n > 0 {
            return n == 1 ? nil : Int(n)
        }
        throw SecFailure(
            errSecParam,
            "kSecMatchLimit must be kSecMatchLimitOne, kSecMatchLimitAll or a positive number"
        )
    }

    /// `kSecAttrAccessible` alone → access control with no flags; with `kSecAttrAccessControl` it must agree.
    static func combine(
        _ ac: AccessControlValue?,
        _ accessible: Protection?
    ) throws(SecFailure) -> AccessControlValue? {
        guard let accessible else { return ac }
        guard let ac else { return AccessControlValue(protection: accessible, flags: []) }
        guard ac.protection == accessible else {
            throw SecFailure(errSecParam, "kSecAttrAccessible disagrees with kSecAttrAccessControl's protection")
        }
        return ac
    }

    /// SecItemUpdate's `attributesToUpdate`: item attributes only.
    static func changeSet(_ c: [String: Any]) throws(SecFailure) -> ([String: KeychainValue], AccessControlValue?) {
        var attrs: [String: KeychainValue] = [:]
        var ac: AccessControlValue?
        var accessible: Protection?
        for (key, v) in c {
            switch key {
            case "class":
                throw SecFailure(errSecParam, "kSecClass cannot be updated")
            case "accc":
                guard let a = v as? SecAccessControl else {
                    throw SecFailure(errSecParam, "kSecAttrAccessControl must be a SecAccessControl")
                }
                ac = a.wireValue
            case "pdmn":
                guard let s = v as? String, let p = Protection(rawValue: s) else {
                    throw SecFailure(errSecParam, "kSecAttrAccessible must be a kSecAttrAccessible value")
                }
                accessible = p
            case "v_Ref", "v_PersistentRef":
                throw SecFailure(errSecParam, "\(key) cannot be updated")
            case "v_Data":
                guard let d = v as? Data else { throw SecFailure(errSecParam, "kSecValueData must be Data") }
                attrs[key] = .data(d)
            default:
                if key.hasPrefix("u_") || key.hasPrefix("r_") || key.hasPrefix("m_") || key == "nleg" {
                    throw SecFailure(errSecParam, "\(key) is not an attribute and cannot be updated")
                }
                guard let kv = value(v) else {
                    throw SecFailure(errSecParam, "unsupported value type \(type(of: v)) for \(key)")
                }
                attrs[key] = kv
            }
        }
        return (attrs, try combine(ac, accessible))
    }

    // MARK: Results

    /// Shapes the daemon's reply as Apple's `result`:
    /// - failure → the status, no result;
    /// - no return key → no result;
    /// - only `kSecReturnData` → `Data` (NSData); only `kSecReturnPersistentRef` → the persistent ref (NSData);
    /// - `kSecReturnAttributes`, or several return keys → an NSDictionary: the item's attributes (when
    ///   asked), plus "v_Data" and/or "v_PersistentRef";
    /// - `kSecMatchLimitAll` or a count > 1 (copy only) → an NSArray of those, at most count long;
    /// - copy answered with success but no item → `errSecItemNotFound`; a reply lacking asked-for
    ///   data → `errSecDecode`.
    static func shape(
        _ reply: KeychainReply,
        for call: SecItemCall,
        operation: KeychainOperation
    ) -> (OSStatus, CFTypeRef?) {
        guard reply.status == .success else { return (reply.status.rawValue, nil) }
        guard call.wantsResult, operation == .copy || operation == .add else { return (errSecSuccess, nil) }
        if reply.items.isEmpty { return (operation == .copy ? errSecItemNotFound : errSecSuccess, nil) }
        if operation == .copy && call.returnsArray {
            var out: [AnyObject] = []
            for item in reply.items.prefix(call.limit ?? .max) {
                guard let o = object(item, call) else {
                    // A key item no SecKey can be made of (a symmetric key, another app's format)
                    // is left out of a list of references rather than failing the list.
                    if call.returnRef { continue }
                    return (errSecDecode, nil)
                }
                out.append(o)
            }
            if out.isEmpty { return (errSecItemNotFound, nil) }
            return (errSecSuccess, NSArray(array: out))
        }
        guard let o = object(reply.items[0], call) else { return (errSecDecode, nil) }
        return (errSecSuccess, o)
    }

    static func object(_ item: KeychainItem, _ call: SecItemCall) -> AnyObject? {
        guard call.returnRef else { return object(item, call.request) }
        guard let data = item.data,
            let key = try? SecKey.fromItem(
                data: data,
                attributes: item.attributes,
                context: call.context,
                reason: call.request.reason
            )
        else { return nil }
        if !call.shown.data && !call.shown.attributes && !call.request.returnPersistentRef { return key }
        // Several return keys: a dictionary, as Apple's.
        let dict = NSMutableDictionary()
        if call.shown.attributes {
            for (k, v) in item.attributes { dict[NSString(string: k)] = object(v) }
        }
        if call.shown.data { dict[NSString(string: "v_Data")] = NSData(data: data) }
        if call.request.returnPersistentRef, let p = item.persistentRef {
            dict[NSString(string: "v_PersistentRef")] = NSData(data: p)
        }
        dict[NSString(string: "v_Ref")] = key
        return dict.copy() as? NSDictionary
    }

    static func object(_ item: KeychainItem, _ r: KeychainRequest) -> AnyObject? {
        let kinds = [r.returnData, r.returnAttributes, r.returnPersistentRef].filter { $0 }.count
        if kinds == 1 && r.returnData { return item.data.map { NSData(data: $0) } }
        if kinds == 1 && r.returnPersistentRef { return item.persistentRef.map { NSData(data: $0) } }
        let dict = NSMutableDictionary()
        if r.returnAttributes {
            for (k, v) in item.attributes { dict[NSString(string: k)] = object(v) }
        }
        if r.returnData {
            guard let d = item.data else { return nil }
            dict[NSString(string: "v_Data")] = NSData(data: d)
        }
        if r.returnPersistentRef {
            guard let p = item.persistentRef else { return nil }
            dict[NSString(string: "v_PersistentRef")] = NSData(data: p)
        }
        return dict.copy() as! NSDictionary
    }
}
