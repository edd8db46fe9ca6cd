import EnclaveCore
import Foundation
import XCTest

final class PasscodeVerifierTests: XCTestCase {
    func testCorrectPasscodeMatches() throws {
        let v = try PasscodeVerifier.make(passcode: "246810", cost: 10)
        XCTAssertTrue(v.matches(try v.derive("246810")))
    }

    func testIncorrectPasscodeDoesNotMatch() throws {
        let v = try PasscodeVerifier.make(passcode: "246810", cost: 10)
        XCTAssertFalse(v.matches(try v.derive("246811")))
        XCTAssertFalse(v.matches(try v.derive("24681")))
        XCTAssertFalse(v.matches(Data()))
    }

    func testSaltDiffersPerVerifier() throws {
        let a = try PasscodeVerifier.make(passcode: "246810", cost: 10)
        let b = try PasscodeVerifier.make(passcode: "246810", cost: 10)
        XCTAssertEqual(a.salt.count, 16)
        XCTAssertNotEqual(a.salt, b.salt)
        XCTAssertNotEqual(a.hash, b.hash, "same passcode, different salt, different hash")
        XCTAssertFalse(a.matches(try b.derive("246810")))
    }

    func testDerivationIsDeterministicPerVerifier() throws {
        let v = try PasscodeVerifier.make(passcode: "246810", cost: 10)
        XCTAssertEqual(try v.derive("abcd"), try v.derive("abcd"))
        XCTAssertEqual(v.hash.count, 32)
    }

    func testHashIsNotThePlainPasscode() throws {
        let v = try PasscodeVerifier.make(passcode: "246810", cost: 10)
        let encoded = try JSONEncoder().encode(v)
        XCTAssertNil(String(decoding: encoded, as: UTF8.self).range(of: "246810"))
        XCTAssertNotEqual(v.hash, Data("246810".utf8))
    }

    func testTooShortPasscodeRejected() {
        XCTAssertThrowsError(try PasscodeVerifier.make(passcode: "123", cost: 10)) { error in
            XCTAssertEqual(error as? PasscodeVerifier.Problem, .tooShort)
        }
        XCTAssertThrowsError(try PasscodeVerifier.make(passcode: "", cost: 10)) { error in
            XCTAssertEqual(error as? PasscodeVerifier.Problem, .tooShort)
        }
        XCTAssertNoThrow(try PasscodeVerifier.validate("1234"))
    }

    func testTooLongPasscodeRejected() {
        XCTAssertThrowsError(try PasscodeVerifier.validate(String(repeating: "a", count: 257))) { error in
            XCTAssertEqual(error as? PasscodeVerifier.Problem, .tooLong)
        }
        XCTAssertNoThrow(try PasscodeVerifier.validate(String(repeating: "a", count: 256)))
    }

    func testCostNeverBelowMinimum() throws {
        let v = try PasscodeVerifier.make(passcode: "246810", cost: 4)
        XCTAssertEqual(v.cost, PasscodeVerifier.minimumCost)
        XCTAssertEqual(PasscodeVerifier.minimumCost, 10)
        XCTAssertTrue(v.matches(try v.derive("246810")))
    }

    func testVerifierSurvivesStorageRoundTrip() throws {
        let v = try PasscodeVerifier.make(passcode: "246810", cost: 10)
        let restored = try JSONDecoder().decode(PasscodeVerifier.self, from: JSONEncoder().encode(v))
        XCTAssertEqual(restored, v)
        XCTAssertTrue(restored.matches(try restored.derive("246810")))
        XCTAssertFalse(restored.matches(try restored.derive("000000")))
    }

    func testVerifierOutputFeedsSameWrongPasscodeRule() throws {
        let v = try PasscodeVerifier.make(passcode: "246810", cost: 10)
        let clock = ManualClock()
        var ledger = AttemptLedger()
        XCTAssertTrue(ledger.recordPasscodeFailure(attempt: try v.derive("1111"), now: clock.monotonic()))
        XCTAssertFalse(ledger.recordPasscodeFailure(attempt: try v.derive("1111"), now: clock.monotonic()))
        XCTAssertTrue(ledger.recordPasscodeFailure(attempt: try v.derive("2222"), now: clock.monotonic()))
        XCTAssertEqual(ledger.passcodeFailures, 2)
    }
}
