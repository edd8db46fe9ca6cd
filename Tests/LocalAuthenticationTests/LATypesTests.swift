import Foundation
import LocalAuthentication
import XCTest

/// LAPolicy, LABiometryType and the other small types against Apple's raw values (apple-api.md §1, §3).
final class LATypesTests: XCTestCase {
    func testPolicyRawValues() {
        XCTAssertEqual(LAPolicy.deviceOwnerAuthenticationWithBiometrics.rawValue, 1)
        XCTAssertEqual(LAPolicy.deviceOwnerAuthentication.rawValue, 2)
        XCTAssertEqual(LAPolicy.deviceOwnerAuthenticationWithCompanion.rawValue, 3)
        XCTAssertEqual(LAPolicy.deviceOwnerAuthenticationWithBiometricsOrCompanion.rawValue, 4)
        XCTAssertEqual(LAPolicy.deviceOwnerAuthenticationWithWristDetection.rawValue, 5)
        XCTAssertEqual(LAPolicy.allCases.map(\.rawValue).sorted(), [1, 2, 3, 4, 5])
    }

    func testWatchPoliciesAreAliasesOfCompanion() {
        XCTAssertEqual(LAPolicy.deviceOwnerAuthenticationWithWatch.rawValue, 3)
        XCTAssertEqual(LAPolicy.deviceOwnerAuthenticationWithBiometricsOrWatch.rawValue, 4)
        XCTAssertEqual(LAPolicy.deviceOwnerAuthenticationWithWatch, .deviceOwnerAuthenticationWithCompanion)
        XCTAssertEqual(
            LAPolicy.deviceOwnerAuthenticationWithBiometricsOrWatch,
            .deviceOwnerAuthenticationWithBiometricsOrCompanion
        )
        // rawValue 3 and 4 come back as the companion cases.
        XCTAssertEqual(LAPolicy(rawValue: 3), .deviceOwnerAuthenticationWithCompanion)
        XCTAssertEqual(LAPolicy(rawValue: 4), .deviceOwnerAuthenticationWithBiometricsOrCompanion)
    }

    func testNoPolicyOutsideOneToFive() {
        for raw in [0, 6, -1, 99, Int.max, Int.min] { XCTAssertNil(LAPolicy(rawValue: raw), "\(raw)") }
    }

    func testPolicyCConstants() {
        XCTAssertEqual(kLAPolicyDeviceOwnerAuthenticationWithBiometrics, 1)
        XCTAssertEqual(kLAPolicyDeviceOwnerAuthentication, 2)
        XCTAssertEqual(kLAPolicyDeviceOwnerAuthenticationWithWatch, 3)
        XCTAssertEqual(kLAPolicyDeviceOwnerAuthenticationWithCompanion, 3)
        XCTAssertEqual(kLAPolicyDeviceOwnerAuthenticationWithBiometricsOrWatch, 4)
        XCTAssertEqual(kLAPolicyDeviceOwnerAuthenticationWithBiometricsOrCompanion, 4)
        XCTAssertEqual(kLAPolicyDeviceOwnerAuthenticationWithWristDetection, 5)
        let pairs: [(Int32, LAPolicy)] = [
            (kLAPolicyDeviceOwnerAuthenticationWithBiometrics, .deviceOwnerAuthenticationWithBiometrics),
            (kLAPolicyDeviceOwnerAuthentication, .deviceOwnerAuthentication),
            (kLAPolicyDeviceOwnerAuthenticationWithWatch, .deviceOwnerAuthenticationWithWatch),
            (kLAPolicyDeviceOwnerAuthenticationWithCompanion, .deviceOwnerAuthenticationWithCompanion),
            (kLAPolicyDeviceOwnerAuthenticationWithBiometricsOrWatch, .deviceOwnerAuthenticationWithBiometricsOrWatch),
            (
                kLAPolicyDeviceOwnerAuthenticationWithBiometricsOrCompanion,
                .deviceOwnerAuthenticationWithBiometricsOrCompanion
            ),
            (kLAPolicyDeviceOwnerAuthenticationWithWristDetection, .deviceOwnerAuthenticationWithWristDetection),
        ]
        for (constant, policy) in pairs { XCTAssertEqual(LAPolicy(rawValue: Int(constant)), policy) }
    }

    func testBiometryTypeRawValues() {
        XCTAssertEqual(LABiometryType.none.rawValue, 0)
        XCTAssertEqual(LABiometryType.touchID.rawValue, 1)
        XCTAssertEqual(LABiometryType.faceID.rawValue, 2)
        XCTAssertEqual(LABiometryType.opticID.rawValue, 4)
        XCTAssertEqual(LABiometryType.allCases.map(\.rawValue).sorted(), [0, 1, 2, 4])
        XCTAssertNil(LABiometryType(rawValue: 3))
        XCTAssertNil(LABiometryType(rawValue: -1))
        XCTAssertEqual(LABiometryType(rawValue: 4), .opticID)
    }

    func testCredentialType() {
        XCTAssertEqual(LACredentialType.applicationPassword.rawValue, 0)
        XCTAssertEqual(LACredentialType.smartCardPIN.rawValue, -3)
        XCTAssertEqual(LACredentialType(rawValue: 0), .applicationPassword)
        XCTAssertEqual(LACredentialType(rawValue: -3), .smartCardPIN)
        XCTAssertNil(LACredentialType(rawValue: -1))
        XCTAssertNil(LACredentialType(rawValue: -2))
        XCTAssertEqual(kLACredentialTypeApplicationPassword, 0)
        XCTAssertEqual(kLACredentialSmartCardPIN, -3)
    }

    func testAccessControlOperation() {
        let expected: [(LAAccessControlOperation, Int)] = [
            (.createItem, 0), (.useItem, 1), (.createKey, 2), (.useKeySign, 3), (.useKeyDecrypt, 4),
            (.useKeyKeyExchange, 5),
        ]
        for (op, raw) in expected {
            XCTAssertEqual(op.rawValue, raw, "\(op)")
            XCTAssertEqual(LAAccessControlOperation(rawValue: raw), op)
        }
        XCTAssertNil(LAAccessControlOperation(rawValue: 6))
        XCTAssertNil(LAAccessControlOperation(rawValue: -1))
    }

    func testCompanionType() {
        XCTAssertEqual(LACompanionType.watch.rawValue, 1)
        XCTAssertEqual(LACompanionType.mac.rawValue, 2)
        XCTAssertEqual(LACompanionType.vision.rawValue, 4)
        // kLACompanionTypeNone (0) has no enum case.
        XCTAssertNil(LACompanionType(rawValue: 0))
        XCTAssertNil(LACompanionType(rawValue: 3))
        XCTAssertEqual(LACompanionType(rawValue: 4), .vision)
    }

    func testMaximumAllowableReuseDurationIsFiveMinutes() {
        XCTAssertEqual(LATouchIDAuthenticationMaximumAllowableReuseDuration, 300)
        let duration: TimeInterval = LATouchIDAuthenticationMaximumAllowableReuseDuration
        XCTAssertEqual(duration, 5 * 60)
    }
}
