import EnclaveProtocol
import Foundation
import LocalAuthentication
import XCTest

@testable import Security

final class MarshalingTests: NoDaemonTestCase {
    private func call(_ q: [String: Any], file: StaticString = #filePath, line: UInt = #line) -> SecItemCall? {
        call(.copy, q, file: file, line: line)
    }

    private func failure(_ q: [String: Any]) -> OSStatus? { failure(.copy, q) }

    private func call(
        _ op: KeychainOperation,
        _ q: [String: Any],
        changes: [String: Any]? = nil,
        file: StaticString = #filePath,
        line: UInt = #line
    ) -> SecItemCall? {
        do {
            return try SecItemMarshaling.call(op, query: q as CFDictionary, changes: changes.map { $0 as CFDictionary })
        } catch {
            XCTFail("\(error)", file: file, line: line)
            return nil
        }
    }

    private func failure(_ op: KeychainOperation, _ q: [String: Any], changes: [String: Any]? = nil) -> OSStatus? {
        do {
            _ = try SecItemMarshaling.call(op, query: q as CFDictionary, changes: changes.map { $0 as CFDictionary })
            return nil
        } catch {
            return error.status
        }
    }

    private let base: [String: Any] = [kSecClass as String: kSecClassGenericPassword]

    func testValueTypes() {
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        var q = base
        q[kSecAttrAccount as String] = "alice"
        q[kSecAttrService as String] = "svc" as NSString
        q[kSecAttrGeneric as String] = Data([1, 2])
        q[kSecAttrComment as String] = NSData(data: Data([3]))
        q[kSecAttrPort as String] = 443
        q[kSecAttrProtocol as String] = NSNumber(value: 7)
        q[kSecAttrSynchronizable as String] = true
        q[kSecAttrIsPermanent as String] = NSNumber(value: false)
        q[kSecAttrCreationDate as String] = date
        q[kSecAttrModificationDate as String] = NSDate(timeIntervalSince1970: 1_700_000_000)
        q[kSecAttrKeySizeInBits as String] = 256.0
        guard let c = call(q) else { return }
        XCTAssertEqual(
            c.request.attributes,
            [
                "class": .string("genp"), "acct": .string("alice"), "svce": .string("svc"),
                "gena": .data(Data([1, 2])), "icmt": .data(Data([3])), "port": .int(443), "ptcl": .int(7),
                "sync": .bool(true), "perm": .bool(false), "cdat": .date(date), "mdat": .date(date), "bsiz": .int(256),
            ]
        )
        XCTAssertNil(c.context)
        XCTAssertEqual(c.request.context, "")
    }

    func testValueFunctionDirectly() {
        XCTAssertEqual(SecItemMarshaling.value(true), .bool(true))
        XCTAssertEqual(SecItemMarshaling.value(NSNumber(value: true)), .bool(true))
        XCTAssertEqual(SecItemMarshaling.value(NSNumber(value: 1)), .int(1))
        XCTAssertEqual(SecItemMarshaling.value(Int64(-5)), .int(-5))
        XCTAssertEqual(SecItemMarshaling.value(UInt64(9)), .int(9))
        XCTAssertNil(SecItemMarshaling.value(2.5))
        XCTAssertNil(SecItemMarshaling.value(UInt64.max))
        XCTAssertNil(SecItemMarshaling.value([1, 2]))
        XCTAssertNil(SecItemMarshaling.value(NSNull()))
    }

    func testUnsupportedValueIsParamError() {
        var q = base
        q[kSecAttrAccount as String] = ["a", "b"]
        XCTAssertEqual(failure(q), errSecParam)
        q[kSecAttrAccount as String] = NSObject()
        XCTAssertEqual(failure(.add, q), errSecParam)
        q[kSecAttrAccount as String] = 2.5
        XCTAssertEqual(failure(q), errSecParam)
    }

    func testUnsupportedValueNeverReachesDaemon() {
        var called = false
        let saved = secItemTransport
        secItemTransport = { _, _, _ in
            called = true
            return KeychainReply(status: .success)
        }
        defer { secItemTransport = saved }
        var q = base
        q[kSecAttrLabel as String] = [1]
        XCTAssertEqual(SecItemAdd(q as CFDictionary, nil), errSecParam)
        XCTAssertEqual(SecItemDelete(q as CFDictionary), errSecParam)
        XCTAssertFalse(called)
    }

    func testMissingOrBadClass() {
        XCTAssertEqual(failure([kSecAttrAccount as String: "a"]), errSecParam)
        XCTAssertEqual(failure([kSecClass as String: "nope"]), errSecParam)
        XCTAssertEqual(failure([kSecClass as String: 1]), errSecParam)
        XCTAssertEqual(SecItemDelete([kSecAttrAccount: "a" as NSString] as CFDictionary), errSecParam)
    }

    func testReturnFlagsAndMatchLimit() {
        var q = base
        q[kSecReturnData as String] = true
        q[kSecReturnAttributes as String] = kCFBooleanTrueForTests
        q[kSecReturnPersistentRef as String] = false
        q[kSecMatchLimit as String] = kSecMatchLimitAll
        guard let c = call(q) else { return }
        XCTAssertTrue(c.request.returnData)
        XCTAssertTrue(c.request.returnAttributes)
        XCTAssertFalse(c.request.returnPersistentRef)
        XCTAssertTrue(c.request.matchAll)
        XCTAssertEqual(c.limit, .max)
        XCTAssertNil(c.request.attributes["r_Data"])
        XCTAssertNil(c.request.attributes["m_Limit"])

        q[kSecMatchLimit as String] = kSecMatchLimitOne
        XCTAssertEqual(call(q)?.request.matchAll, false)
        XCTAssertNil(call(q)?.limit)
        q[kSecMatchLimit as String] = 1
        XCTAssertEqual(call(q)?.request.matchAll, false)
        q[kSecMatchLimit as String] = 3
        XCTAssertEqual(call(q)?.request.matchAll, true)
        XCTAssertEqual(call(q)?.limit, 3)
        q[kSecMatchLimit as String] = 0
        XCTAssertEqual(failure(q), errSecParam)
        q[kSecMatchLimit as String] = "m_LimitSome"
        XCTAssertEqual(failure(q), errSecParam)
        q[kSecMatchLimit as String] = nil
        XCTAssertEqual(call(q)?.request.matchAll, false)

        q[kSecReturnData as String] = "yes"
        XCTAssertEqual(failure(q), errSecParam)
        q[kSecReturnData as String] = nil
        // A password item has no reference object: kSecReturnRef asks for nothing more (as on
        // Apple platforms, where wrappers ask for it beside the attributes).
        q[kSecReturnRef as String] = true
        q[kSecReturnAttributes as String] = true
        XCTAssertEqual(call(q)?.returnRef, false)
        XCTAssertEqual(call(q)?.request.returnAttributes, true)
        XCTAssertEqual(call(q)?.request.returnData, false)
        q[kSecReturnRef as String] = false
        XCTAssertNotNil(call(q))
    }

    func testReturnKeysIgnoredForDeleteAndUpdate() {
        var q = base
        q[kSecReturnData as String] = true
        q[kSecMatchLimit as String] = kSecMatchLimitAll
        let c = call(.delete, q)
        XCTAssertEqual(c?.request.returnData, false)
        XCTAssertEqual(c?.request.matchAll, false)
    }

    @available(*, deprecated)
    func testUIModesAndPrompt() {
        var q = base
        q[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUIAllow
        XCTAssertEqual(call(q)?.request.authenticationUI, .allow)
        q[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUIFail
        XCTAssertEqual(call(.add, q)?.request.authenticationUI, .fail)
        q[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUISkip
        XCTAssertEqual(call(q)?.request.authenticationUI, .skip)
        XCTAssertEqual(failure(.add, q), errSecParam, "Skip is only for SecItemCopyMatching")
        XCTAssertEqual(failure(.delete, q), errSecParam)
        q[kSecUseAuthenticationUI as String] = "u_Whatever"
        XCTAssertEqual(failure(q), errSecParam)
        q[kSecUseAuthenticationUI as String] = nil
        XCTAssertNil(call(q)?.request.authenticationUI)

        q[kSecUseNoAuthenticationUI as String] = true
        XCTAssertEqual(call(q)?.request.authenticationUI, .fail)
        q[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUIAllow
        XCTAssertEqual(call(q)?.request.authenticationUI, .allow, "the explicit mode wins")
        q[kSecUseNoAuthenticationUI as String] = nil

        q[kSecUseOperationPrompt as String] = "Unlock the vault"
        XCTAssertEqual(call(q)?.request.reason, "Unlock the vault")
        q[kSecUseOperationPrompt as String] = 5
        XCTAssertEqual(failure(q), errSecParam)
    }

    func testAccessControlAndAccessible() throws {
        let ac = try XCTUnwrap(
            SecAccessControlCreateWithFlags(
                nil,
                kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
                .biometryCurrentSet,
                nil
            )
        )
        var q = base
        q[kSecAttrAccessControl as String] = ac
        q[kSecValueData as String] = Data("pw".utf8)
        let c = call(.add, q)
        XCTAssertEqual(
            c?.request.accessControl,
            AccessControlValue(protection: .whenPasscodeSetThisDeviceOnly, flags: .biometryCurrentSet)
        )
        XCTAssertEqual(c?.request.attributes["v_Data"], .data(Data("pw".utf8)))
        XCTAssertNil(c?.request.attributes["accc"])

        // Accessible alone → access control without flags.
        var a = base
        a[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
        XCTAssertEqual(
            call(.add, a)?.request.accessControl,
            AccessControlValue(protection: .afterFirstUnlock, flags: [])
        )
        XCTAssertNil(call(.add, a)?.request.attributes["pdmn"])
        // In a query it is a match attribute.
        XCTAssertEqual(call(.copy, a)?.request.attributes["pdmn"], .string("ck"))
        XCTAssertNil(call(.copy, a)?.request.accessControl)

        // Both: must agree.
        q[kSecAttrAccessible as String] = kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly
        XCTAssertEqual(call(.add, q)?.request.accessControl?.flags, .biometryCurrentSet)
        q[kSecAttrAccessible as String] = kSecAttrAccessibleWhenUnlocked
        XCTAssertEqual(failure(.add, q), errSecParam)

        a[kSecAttrAccessible as String] = "zz"
        XCTAssertEqual(failure(.add, a), errSecParam)
        a[kSecAttrAccessible as String] = nil
        a[kSecAttrAccessControl as String] = "akpu"
        XCTAssertEqual(failure(.add, a), errSecParam)
    }

    func testValueKeys() {
        var q = base
        q[kSecValueData as String] = "not data"
        XCTAssertEqual(failure(.add, q), errSecParam)
        q[kSecValueData as String] = nil
        q[kSecValuePersistentRef as String] = Data([9, 9])
        XCTAssertEqual(call(q)?.request.attributes["v_PersistentRef"], .data(Data([9, 9])))
        q[kSecValueRef as String] = NSObject()
        XCTAssertEqual(failure(q), errSecParam)
    }

    func testUnknownControlKeysAndDataProtectionKeychain() {
        var q = base
        q["m_CaseInsensitive"] = true
        XCTAssertEqual(failure(q), errSecUnimplemented)
        q["m_CaseInsensitive"] = nil
        q[kSecUseDataProtectionKeychain as String] = true
        XCTAssertEqual(call(q)?.request.attributes, ["class": .string("genp")])
    }

    func testQueryWithLAContext() {
        let context = LAContext()
        context.localizedReason = "Read the token"
        var q = base
        q[kSecUseAuthenticationContext as String] = context
        q[kSecAttrAccount as String] = "alice"
        let c = call(q)
        XCTAssertTrue(c?.context === context)
        XCTAssertNil(c?.request.attributes["u_AuthCtx"])
        XCTAssertNil(c?.request.reason, "the bridge fills the reason from the context")
        q[kSecUseAuthenticationContext as String] = "ctx-id"
        XCTAssertEqual(failure(q), errSecParam)
    }

    func testNSStringKeyedDictionary() {
        let d = [kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com" as NSString] as CFDictionary
        let c = try? SecItemMarshaling.call(.copy, query: d)
        XCTAssertEqual(c?.request.attributes, ["class": .string("inet"), "srvr": .string("example.com")])
    }

    func testUpdateChanges() throws {
        var q = base
        q[kSecAttrAccount as String] = "alice"
        let ac = try XCTUnwrap(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil))
        let c = call(
            .update,
            q,
            changes: [
                kSecValueData as String: Data([7]), kSecAttrLabel as String: "L",
                kSecAttrAccessControl as String: ac,
            ]
        )
        XCTAssertEqual(c?.request.attributes, ["class": .string("genp"), "acct": .string("alice")])
        XCTAssertEqual(c?.request.changes, ["v_Data": .data(Data([7])), "labl": .string("L")])
        XCTAssertEqual(
            c?.request.changesAccessControl,
            AccessControlValue(protection: .whenUnlocked, flags: .userPresence)
        )
        XCTAssertNil(c?.request.accessControl)

        XCTAssertEqual(
            call(.update, q, changes: [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock])?
                .request.changesAccessControl,
            AccessControlValue(protection: .afterFirstUnlock, flags: [])
        )
        XCTAssertEqual(failure(.update, q, changes: [kSecClass as String: kSecClassKey]), errSecParam)
        XCTAssertEqual(failure(.update, q, changes: [kSecReturnData as String: true]), errSecParam)
        XCTAssertEqual(failure(.update, q, changes: [kSecAttrLabel as String: [1]]), errSecParam)
        XCTAssertEqual(
            SecItemUpdate(q as CFDictionary, [kSecMatchLimit as String: kSecMatchLimitAll] as CFDictionary),
            errSecParam
        )
    }
}

/// `kCFBooleanTrue` as it arrives from Apple code: an NSNumber holding a Bool.
let kCFBooleanTrueForTests = NSNumber(value: true)
