import EnclaveProtocol
import XCTest

@testable import Security

final class AccessControlTests: XCTestCase {
    func testFlagRawValues() {
        XCTAssertEqual(SecAccessControlCreateFlags.userPresence.rawValue, 1)
        XCTAssertEqual(SecAccessControlCreateFlags.biometryAny.rawValue, 2)
        XCTAssertEqual(SecAccessControlCreateFlags.biometryCurrentSet.rawValue, 8)
        XCTAssertEqual(SecAccessControlCreateFlags.devicePasscode.rawValue, 16)
        XCTAssertEqual(SecAccessControlCreateFlags.companion.rawValue, 32)
        XCTAssertEqual(SecAccessControlCreateFlags.or.rawValue, 16384)
        XCTAssertEqual(SecAccessControlCreateFlags.and.rawValue, 32768)
        XCTAssertEqual(SecAccessControlCreateFlags.privateKeyUsage.rawValue, 1_073_741_824)
        XCTAssertEqual(SecAccessControlCreateFlags.applicationPassword.rawValue, 2_147_483_648)
    }

    @available(*, deprecated)
    func testDeprecatedAliases() {
        XCTAssertEqual(SecAccessControlCreateFlags.touchIDAny, .biometryAny)
        XCTAssertEqual(SecAccessControlCreateFlags.touchIDCurrentSet, .biometryCurrentSet)
        XCTAssertEqual(SecAccessControlCreateFlags.watch, .companion)
    }

    func testCreateSuccess() {
        var error: Unmanaged<CFError>?
        let ac = SecAccessControlCreateWithFlags(
            nil,
            kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
            [.biometryAny, .or, .devicePasscode],
            &error
        )
        XCTAssertNil(error)
        XCTAssertEqual(ac?.protection, "akpu")
        XCTAssertEqual(ac?.flags, [.biometryAny, .or, .devicePasscode])
        XCTAssertEqual(
            ac?.wireValue,
            AccessControlValue(protection: .whenPasscodeSetThisDeviceOnly, flags: [.biometryAny, .devicePasscode, .or])
        )
        XCTAssertNotNil(SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked, [], nil))
        XCTAssertNotNil(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .applicationPassword, nil))
        XCTAssertNotNil(
            SecAccessControlCreateWithFlags(
                nil,
                kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                [.privateKeyUsage, .biometryCurrentSet],
                nil
            )
        )
        XCTAssertNotNil(SecAccessControlCreateWithFlags(nil, "cku" as NSString, [.userPresence, .devicePasscode], nil))
    }

    private func assertRejected(
        _ protection: CFTypeRef,
        _ flags: SecAccessControlCreateFlags,
        contains text: String,
        file: StaticString = #filePath,
        line: UInt = #line
    ) {
        var error: Unmanaged<CFError>?
        XCTAssertNil(SecAccessControlCreateWithFlags(nil, protection, flags, &error), file: file, line: line)
        guard let e = error?.takeRetainedValue() else { return XCTFail("no error", file: file, line: line) }
        XCTAssertEqual(e.domain, NSOSStatusErrorDomain, file: file, line: line)
        XCTAssertEqual(e.code, Int(errSecParam), file: file, line: line)
        XCTAssertTrue(e.localizedDescription.contains(text), e.localizedDescription, file: file, line: line)
        // Passing nil for the error pointer is allowed.
        XCTAssertNil(SecAccessControlCreateWithFlags(nil, protection, flags, nil), file: file, line: line)
    }

    func testRejectsUnknownProtection() {
        assertRejected("nope" as NSString, .userPresence, contains: "protection")
        assertRejected(NSNumber(value: 1), .userPresence, contains: "protection")
    }

    func testRejectsAndWithOr() {
        assertRejected(
            kSecAttrAccessibleWhenUnlocked,
            [.biometryAny, .devicePasscode, .and, .or],
            contains: "only one logical operation"
        )
    }

    func testRejectsOperatorWithoutConstraint() {
        assertRejected(kSecAttrAccessibleWhenUnlocked, [.or], contains: "without any constraint")
        assertRejected(
            kSecAttrAccessibleWhenUnlocked,
            [.and, .applicationPassword],
            contains: "without any constraint"
        )
    }

    func testRejectsBothBiometrySets() {
        assertRejected(
            kSecAttrAccessibleWhenUnlocked,
            [.biometryAny, .biometryCurrentSet],
            contains: "cannot be combined"
        )
    }

    func testRejectsUnknownBits() {
        assertRejected(
            kSecAttrAccessibleWhenUnlocked,
            SecAccessControlCreateFlags(rawValue: 1 << 2),
            contains: "unknown flag bits"
        )
    }
}
