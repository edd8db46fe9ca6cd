import EnclaveCore
import EnclaveProtocol
import XCTest

/// `AccessRequirement`: how `SecAccessControlCreateFlags` read as evaluation steps.
final class AccessControlTests: XCTestCase {
    func testFlagsReadAsSteps() throws {
        let table: [(AccessControlFlags, [EvaluationStep], String)] = [
            ([], [], "no constraint: no authentication"),
            ([.privateKeyUsage], [], "privateKeyUsage is not a constraint"),
            ([.applicationPassword], [], "applicationPassword is not a constraint"),
            ([.userPresence], [.owner], "user presence: biometrics or passcode"),
            ([.biometryAny], [.biometric], ""),
            ([.biometryCurrentSet], [.biometric], ""),
            ([.devicePasscode], [.passcode], ""),
            ([.companion], [.companion], ""),
            ([.biometryAny, .devicePasscode], [.biometric, .passcode], "several without or: all, in order"),
            ([.biometryAny, .and, .devicePasscode], [.biometric, .passcode], "and: all"),
            ([.userPresence, .devicePasscode], [.owner, .passcode], ""),
            ([.biometryAny, .or, .devicePasscode], [.owner], "or of biometry and passcode: the owner policy"),
            ([.biometryCurrentSet, .or, .companion], [.biometric], "a companion drops out of an or"),
            ([.devicePasscode, .or, .companion], [.passcode], ""),
            ([.companion, .or], [.companion], "a lone companion stays"),
            ([.userPresence, .or, .biometryAny], [.owner], ""),
        ]
        for (flags, steps, why) in table {
            XCTAssertEqual(try AccessRequirement(flags: flags).steps, steps, "\(flags) \(why)")
        }
    }

    func testRefusesContradictionsAndUnknownBits() {
        XCTAssertThrowsError(try AccessRequirement(flags: [.and, .or, .biometryAny])) {
            XCTAssertEqual(($0 as? CoreError)?.code, .accessControlAndWithOr)
        }
        XCTAssertThrowsError(try AccessRequirement(flags: AccessControlFlags(rawValue: 1 << 2))) {
            XCTAssertEqual(($0 as? CoreError)?.message, "unknown SecAccessControlCreateFlags bits 0x4")
        }
    }

    func testCurrentSetAfterAnEnrolmentChange() throws {
        let bound = try AccessRequirement(flags: .biometryCurrentSet)
        XCTAssertEqual(bound.steps(madeAt: 3, enrolmentNow: 3), [.biometric])
        XCTAssertNil(bound.steps(madeAt: 3, enrolmentNow: 4), "invalidated for good")
        let withPasscode = try AccessRequirement(flags: [.biometryCurrentSet, .or, .devicePasscode])
        XCTAssertEqual(withPasscode.steps(madeAt: 3, enrolmentNow: 4), [.passcode], "the passcode alternative stays")
        let any = try AccessRequirement(flags: .biometryAny)
        XCTAssertEqual(any.steps(madeAt: 3, enrolmentNow: 4), [.biometric], "biometryAny survives enrolment changes")
    }

    func testFlagNamesAreApples() {
        XCTAssertEqual(AccessControlFlags([.biometryAny, .or, .devicePasscode]).names, "biometryAny,devicePasscode,or")
        XCTAssertEqual(AccessControlFlags([]).names, "none")
        XCTAssertEqual(AccessControlFlags(rawValue: 1 << 2 | 1).names, "userPresence,0x4")
        XCTAssertEqual(AccessControlFlags.known.rawValue, 0xC000_C03B)
    }
}
