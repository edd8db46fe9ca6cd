// libFuzzer targets for the keychain's two parsers of what others send: `secitem`, an app's SecItem
// dictionary (arbitrary keys and values, nested) through Security's public calls, which marshal it
// and refuse what is malformed before any daemon is asked (LAENCLAVED_SOCKET names none, so a
// dictionary that passes fails fast at the connection); and `rules`, a request as it arrives from
// the wire (JSON, any shape) through the daemon's keychain rules (EnclaveCore.KeychainRules):
// validation of a new item, of changes, matching, description. scripts/fuzz-keychain builds it
// with -sanitize=fuzzer,address -DFUZZING; the ordinary build replays the committed corpus.

import EnclaveCore
import EnclaveProtocol
import Foundation
import FuzzSupport
import Security

enum KeychainFuzz {
    enum Target: String, CaseIterable { case secitem, rules }

    static func run(_ target: Target, _ data: Data) {
        switch target {
        case .secitem: secItem(data)
        case .rules: rules(data)
        }
    }

    // MARK: secitem

    /// The keys an app may write, Apple's names and a few no one defines.
    static let keys: [String] =
        ([
            kSecClass, kSecAttrService, kSecAttrAccount, kSecAttrLabel, kSecAttrAccessGroup, kSecAttrAccessible,
            kSecAttrAccessControl,
            kSecAttrSynchronizable, kSecValueData, kSecValuePersistentRef, kSecReturnData, kSecReturnAttributes,
            kSecReturnRef,
            kSecReturnPersistentRef, kSecMatchLimit, kSecAttrServer, kSecAttrProtocol, kSecAttrPort, kSecAttrPath,
            kSecAttrKeyType,
            kSecAttrKeySizeInBits, kSecAttrApplicationTag, kSecAttrKeyClass, kSecAttrGeneric, kSecAttrComment,
            kSecAttrDescription,
            kSecUseDataProtectionKeychain, kSecAttrTokenID, kSecUseAuthenticationUI, kSecUseOperationPrompt,
            kSecAttrCreationDate,
            "unknownKey" as CFString, "" as CFString, "v_Data" as CFString,
        ] as [CFString]).map { $0 as String }

    /// Bytes read front to back; past the end, zeros.
    struct Reader {
        var bytes: [UInt8]
        var index = 0
        mutating func byte() -> UInt8 {
            defer { index += 1 }
            return index < bytes.count ? bytes[index] : 0
        }
        mutating func take(_ n: Int) -> [UInt8] {
            let end = min(bytes.count, index + n)
            defer { index = max(index, end) }
            return index < end ? Array(bytes[index..<end]) : []
        }
        var atEnd: Bool { index >= bytes.count }
    }

    static func value(_ r: inout Reader, depth: Int) -> Any {
        switch r.byte() % 13 {
        case 0: return String(decoding: r.take(Int(r.byte() % 40)), as: UTF8.self)
        case 1: return Data(r.take(Int(r.byte())))
        case 2: return Int(Int8(bitPattern: r.byte())) * Int(r.byte())
        case 3: return r.byte() & 1 == 0
        case 4: return NSNumber(value: Double(Int8(bitPattern: r.byte())) / Double(max(1, r.byte())))
        case 5: return NSNumber(value: UInt64.max - UInt64(r.byte()))
        case 6:
            return Date(
                timeIntervalSince1970: Double(Int16(bitPattern: UInt16(r.byte()) << 8 | UInt16(r.byte()))) * 1e6
            )
        case 7: return NSNull()
        case 8: return depth > 2 ? "deep" : (0..<Int(r.byte() % 4)).map { _ in value(&r, depth: depth + 1) }
        case 9: return depth > 2 ? "deep" : dictionary(&r, depth: depth + 1)
        case 10:
            let flags = SecAccessControlCreateFlags(
                rawValue: UInt(r.byte()) | UInt(r.byte()) << 8 | UInt(r.byte() & 0xC0) << 24
            )
            return SecAccessControlCreateWithFlags(
                nil,
                [
                    kSecAttrAccessibleWhenUnlocked, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
                    "bogus" as CFString,
                ][Int(r.byte() % 3)],
                flags,
                nil
            ) as Any? ?? NSNull()
        case 11:
            return [
                kSecClassGenericPassword, kSecClassInternetPassword, kSecClassKey, kSecClassCertificate,
                kSecMatchLimitAll,
                kSecMatchLimitOne, kSecAttrAccessibleAfterFirstUnlock, kSecUseAuthenticationUIFail,
            ][Int(r.byte() % 8)]
        default: return Double(Int8(bitPattern: r.byte())) + 0.5
        }
    }

    static func dictionary(_ r: inout Reader, depth: Int) -> [String: Any] {
        var d: [String: Any] = [:]
        for _ in 0..<Int(r.byte() % 12) where !r.atEnd {
            d[keys[Int(r.byte()) % keys.count]] = value(&r, depth: depth)
        }
        return d
    }

    static func secItem(_ data: Data) {
        var r = Reader(bytes: Array(data))
        let operation = r.byte() % 4
        let query = dictionary(&r, depth: 0) as CFDictionary
        var result: CFTypeRef?
        switch operation {
        case 0: _ = SecItemAdd(query, &result)
        case 1: _ = SecItemCopyMatching(query, &result)
        case 2: _ = SecItemUpdate(query, dictionary(&r, depth: 0) as CFDictionary)
        default: _ = SecItemDelete(query)
        }
    }

    // MARK: rules

    static func rules(_ data: Data) {
        guard let r = try? JSONDecoder().decode(KeychainRequest.self, from: data) else { return }
        _ = try? KeychainRules.checkKeys(r.attributes)
        _ = try? KeychainRules.itemClass(r.attributes)
        _ = try? KeychainRules.persistentRef(r.attributes)
        let query = try? KeychainRules.IndexedQuery(r.attributes)
        if let item = try? KeychainRules.newItem(r.attributes, accessControl: r.accessControl) {
            // Matching runs on what was accepted, against the request it came from.
            _ = query?.matches(item.attributes)
        }
        if let changes = r.changes { _ = try? KeychainRules.changes(changes, accessControl: r.changesAccessControl) }
        _ = query?.matches(r.changes ?? r.attributes)
        for value in r.attributes.values { _ = KeychainRules.describe(value) }
    }
}

@main
struct KeychainFuzzMain {
    static func main() throws {
        // No daemon: a dictionary that passes the marshaling fails at once at the connection.
        setenv("LAENCLAVED_SOCKET", "/nonexistent/laenclaved-fuzz.sock", 1)
        try FuzzMain.run(
            KeychainFuzz.Target.self,
            variable: "KEYCHAIN_FUZZ_TARGET",
            default: .secitem,
            KeychainFuzz.run
        )
    }
}
