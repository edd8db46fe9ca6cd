import XCTest

@testable import Security

final class ConstantsTests: XCTestCase {
    func testClassAndAttributeStrings() {
        let expected: [(CFString, String)] = [
            (kSecClass, "class"), (kSecClassGenericPassword, "genp"), (kSecClassInternetPassword, "inet"),
            (kSecClassKey, "keys"), (kSecClassCertificate, "cert"), (kSecClassIdentity, "idnt"),
            (kSecAttrService, "svce"), (kSecAttrAccount, "acct"), (kSecAttrServer, "srvr"), (kSecAttrLabel, "labl"),
            (kSecAttrAccessGroup, "agrp"), (kSecAttrAccessible, "pdmn"), (kSecAttrAccessControl, "accc"),
            (kSecAttrGeneric, "gena"), (kSecAttrComment, "icmt"), (kSecAttrDescription, "desc"),
            (kSecAttrCreationDate, "cdat"), (kSecAttrModificationDate, "mdat"), (kSecAttrSynchronizable, "sync"),
            (kSecAttrProtocol, "ptcl"), (kSecAttrPort, "port"), (kSecAttrPath, "path"),
            (kSecAttrSecurityDomain, "sdmn"), (kSecAttrAuthenticationType, "atyp"), (kSecAttrApplicationTag, "atag"),
            (kSecAttrApplicationLabel, "klbl"), (kSecAttrKeyType, "type"), (kSecAttrKeyTypeECSECPrimeRandom, "73"),
            (kSecAttrKeySizeInBits, "bsiz"), (kSecAttrTokenID, "tkid"),
            (kSecAttrTokenIDSecureEnclave, "com.apple.setoken"),
            (kSecAttrIsPermanent, "perm"), (kSecPrivateKeyAttrs, "private"),
        ]
        for (c, s) in expected { XCTAssertEqual(c as String, s) }
    }

    @available(*, deprecated)
    func testAccessibleStrings() {
        XCTAssertEqual(kSecAttrAccessibleWhenUnlocked as String, "ak")
        XCTAssertEqual(kSecAttrAccessibleAfterFirstUnlock as String, "ck")
        XCTAssertEqual(kSecAttrAccessibleAlways as String, "dk")
        XCTAssertEqual(kSecAttrAccessibleWhenUnlockedThisDeviceOnly as String, "aku")
        XCTAssertEqual(kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String, "cku")
        XCTAssertEqual(kSecAttrAccessibleAlwaysThisDeviceOnly as String, "dku")
        XCTAssertEqual(kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly as String, "akpu")
    }

    @available(*, deprecated)
    func testValueReturnMatchAndUseStrings() {
        let expected: [(CFString, String)] = [
            (kSecValueData, "v_Data"), (kSecValueRef, "v_Ref"), (kSecValuePersistentRef, "v_PersistentRef"),
            (kSecReturnData, "r_Data"), (kSecReturnAttributes, "r_Attributes"), (kSecReturnRef, "r_Ref"),
            (kSecReturnPersistentRef, "r_PersistentRef"),
            (kSecMatchLimit, "m_Limit"), (kSecMatchLimitOne, "m_LimitOne"), (kSecMatchLimitAll, "m_LimitAll"),
            (kSecUseAuthenticationContext, "u_AuthCtx"), (kSecUseAuthenticationUI, "u_AuthUI"),
            (kSecUseAuthenticationUIAllow, "u_AuthUIA"), (kSecUseAuthenticationUIFail, "u_AuthUIF"),
            (kSecUseAuthenticationUISkip, "u_AuthUIS"), (kSecUseOperationPrompt, "u_OpPrompt"),
            (kSecUseNoAuthenticationUI, "u_NoAuthUI"), (kSecUseDataProtectionKeychain, "nleg"),
        ]
        for (c, s) in expected { XCTAssertEqual(c as String, s) }
    }

    func testStatusValues() {
        XCTAssertEqual(errSecSuccess, 0)
        XCTAssertEqual(errSecUnimplemented, -4)
        XCTAssertEqual(errSecParam, -50)
        XCTAssertEqual(errSecAllocate, -108)
        XCTAssertEqual(errSecUserCanceled, -128)
        XCTAssertEqual(errSecNotAvailable, -25291)
        XCTAssertEqual(errSecAuthFailed, -25293)
        XCTAssertEqual(errSecDuplicateItem, -25299)
        XCTAssertEqual(errSecItemNotFound, -25300)
        XCTAssertEqual(errSecInvalidItemRef, -25304)
        XCTAssertEqual(errSecInteractionNotAllowed, -25308)
        XCTAssertEqual(errSecInteractionRequired, -25315)
        XCTAssertEqual(errSecDecode, -26275)
        XCTAssertEqual(errSecMissingEntitlement, -34018)
        XCTAssertEqual(errSecVerifyFailed, -67808)
    }

    func testCFBridgingCompiles() {
        let d = [kSecClass: kSecClassGenericPassword] as CFDictionary
        XCTAssertEqual(d.count, 1)
        let q: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
        XCTAssertEqual((q as CFDictionary).count, 1)
        var item: CFTypeRef? = NSData(data: Data([1]))
        XCTAssertEqual(item as? Data, Data([1]))
        item = nil
        XCTAssertNil(item)
    }

    /// A keychain result bridged to Swift has `String` keys; Apple code reads it with the kSec
    /// constants themselves (an NSString hashes as its String, as on Apple platforms).
    func testAConstantFindsItsKeyInABridgedResult() {
        let bridged: [AnyHashable: Any] = ["acct": "alice", "svce": "mail"]
        XCTAssertEqual(bridged[kSecAttrAccount] as? String, "alice")
        XCTAssertEqual(bridged[AnyHashable(kSecAttrService)] as? String, "mail")
        XCTAssertEqual(Set<AnyHashable>([kSecAttrAccount, "acct"]).count, 1)
        let keyedByConstants: [AnyHashable: Any] = [kSecAttrLabel: "L"]
        XCTAssertEqual(keyedByConstants["labl"] as? String, "L")
    }
}
