import Crypto
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

    /// New passcodes need 6 characters by default; a configuration may lower it to 4, never below.
    func testTooShortPasscodeRejected() {
        XCTAssertThrowsError(try PasscodeVerifier.make(passcode: "12345", cost: 10)) { error in
            XCTAssertEqual((error as? CoreError)?.message, "a passcode needs at least 6 characters")
        }
        XCTAssertThrowsError(try PasscodeVerifier.make(passcode: "", cost: 10)) { error in
            XCTAssertEqual((error as? CoreError)?.message, "a passcode needs at least 6 characters")
        }
        XCTAssertNoThrow(try PasscodeVerifier.validate("123456"))
        XCTAssertNoThrow(try PasscodeVerifier.validate("1234", minimumLength: 4))
        XCTAssertThrowsError(try PasscodeVerifier.validate("123", minimumLength: 2)) { error in
            XCTAssertEqual((error as? CoreError)?.message, "a passcode needs at least 4 characters", "never below 4")
        }
        XCTAssertEqual(try PasscodeVerifier.make(passcode: "123456", cost: 10).length, 6)
    }

    /// OWASP's minimum for scrypt: N = 2^17, r = 8, p = 1 — 128 MiB a check.
    func testNewVerifiersUseOWASPsCostAndOldOnesAskForAnUpgrade() throws {
        XCTAssertEqual(PasscodeVerifier.defaultCost, 17)
        XCTAssertEqual(PasscodeVerifier.memory(cost: 17), 128 << 20)
        let old = try PasscodeVerifier.remade(passcode: "1234", cost: 15)
        XCTAssertTrue(old.needsUpgrade(toCost: 17))
        XCTAssertFalse(old.needsUpgrade(toCost: 15))
        XCTAssertFalse(
            try PasscodeVerifier.remade(passcode: "1234", cost: 12).needsUpgrade(toCost: 10),
            "never below the minimum cost"
        )
        // A verifier stored before the length was noted reads back (no length field).
        var json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(old)) as! [String: Any]
        json["length"] = nil
        let decoded = try JSONDecoder().decode(
            PasscodeVerifier.self,
            from: JSONSerialization.data(withJSONObject: json)
        )
        XCTAssertTrue(decoded.matches(try decoded.derive("1234")))
        XCTAssertNil(decoded.length)
    }

    func testTooLongPasscodeRejected() {
        XCTAssertThrowsError(try PasscodeVerifier.validate(String(repeating: "a", count: 257))) { error in
            XCTAssertEqual((error as? CoreError)?.code, .passcodeTooLong)
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

    /// Keyed: the stored hash is an HMAC of scrypt's output, the length sealed; only the key checks
    /// it or reads the length, and another key tests nothing.
    func testAKeyedVerifierChecksOnlyWithItsKey() throws {
        let key = SymmetricKey(size: .bits256)
        let v = try PasscodeVerifier.make(passcode: "2468", cost: 10, minimumLength: 4, key: key)
        XCTAssertTrue(v.isKeyed)
        XCTAssertNil(v.length)
        XCTAssertEqual(v.length(key: key), 4)
        XCTAssertTrue(v.matches(try v.derive("2468", key: key)))
        XCTAssertFalse(v.matches(try v.derive("2469", key: key)))
        XCTAssertThrowsError(try v.derive("2468")) { XCTAssertEqual(($0 as? CoreError)?.code, .verifierKeyNeeded) }
        let other = SymmetricKey(size: .bits256)
        XCTAssertFalse(v.matches(try v.derive("2468", key: other)))
        XCTAssertNil(v.length(key: other))
        var unkeyed = v
        unkeyed.keyed = nil
        XCTAssertFalse(unkeyed.matches(try unkeyed.derive("2468")), "scrypt alone does not give the stored hash")
        let json = try JSONEncoder().encode(v)
        let decoded = try JSONDecoder().decode(PasscodeVerifier.self, from: json)
        XCTAssertEqual(decoded, v)
        // Stored under a name of its own: a reader from before keying fails rather than compare.
        let fields = try XCTUnwrap(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        XCTAssertNil(fields["hash"])
        XCTAssertNotNil(fields["keyedHash"])
        // A keyed hash stored under "hash" (before it had a name of its own) still reads.
        var older = fields
        older["hash"] = older.removeValue(forKey: "keyedHash")
        let olderJSON = try JSONSerialization.data(withJSONObject: older)
        XCTAssertEqual(try JSONDecoder().decode(PasscodeVerifier.self, from: olderJSON), v)
    }

    /// A state moving from the software root to the TPM root (issue 31, item 7): a keyed verifier
    /// and one from before keying move to the TPM root's key without the passcode. Afterwards the
    /// prior key alone (the key file's) tests no guess, the new key alone neither for a keyed one,
    /// both together check the passcode; the length moves sealed; a moved one does not move again.
    func testAVerifierMovesToANewKeyWithoutThePasscode() throws {
        let prior = SymmetricKey(size: .bits256)
        let key = SymmetricKey(size: .bits256)
        let keyed = try PasscodeVerifier.make(passcode: "2468", cost: 10, minimumLength: 4, key: prior)
        let moved = try keyed.moved(to: key, from: prior)
        XCTAssertEqual(moved.priorKeyed, true)
        XCTAssertEqual(moved.salt, keyed.salt, "the same scrypt")
        XCTAssertTrue(moved.matches(try moved.derive("2468", key: key, prior: prior)))
        XCTAssertFalse(moved.matches(try moved.derive("2469", key: key, prior: prior)))
        XCTAssertThrowsError(try moved.derive("2468", key: key)) {
            XCTAssertEqual(($0 as? CoreError)?.code, .verifierKeyNeeded)
        }
        // The prior key as if it were the key, and the key as if it were the prior: no guess tests.
        XCTAssertFalse(moved.matches(try moved.derive("2468", key: prior, prior: prior)))
        XCTAssertFalse(moved.matches(try moved.derive("2468", key: key, prior: key)))
        XCTAssertFalse(keyed.matches(try moved.derive("2468", key: prior, prior: prior)))
        XCTAssertEqual(moved.length(key: key), 4)
        XCTAssertNil(moved.length(key: prior), "the length is sealed under the new key only")
        XCTAssertThrowsError(try moved.moved(to: SymmetricKey(size: .bits256), from: key)) {
            XCTAssertEqual(($0 as? CoreError)?.code, .verifierMovedAlready)
        }
        // Stored under a name of its own (a reader from before moves fails rather than compare).
        let json = try JSONEncoder().encode(moved)
        let fields = try XCTUnwrap(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        XCTAssertNotNil(fields["movedHash"])
        XCTAssertNil(fields["keyedHash"])
        XCTAssertNil(fields["hash"])
        XCTAssertEqual(try JSONDecoder().decode(PasscodeVerifier.self, from: json), moved)

        // One from before keying: the move keys it, and its clear length goes under the key.
        let unkeyed = try PasscodeVerifier.make(passcode: "13579", cost: 10, minimumLength: 4)
        XCTAssertEqual(unkeyed.length, 5)
        let movedUnkeyed = try unkeyed.moved(to: key, from: prior)
        XCTAssertNil(movedUnkeyed.priorKeyed, "keyed once: as one made keyed")
        XCTAssertTrue(movedUnkeyed.isKeyed)
        XCTAssertNil(movedUnkeyed.length)
        XCTAssertEqual(movedUnkeyed.length(key: key), 5)
        XCTAssertTrue(movedUnkeyed.matches(try movedUnkeyed.derive("13579", key: key)))
        XCTAssertThrowsError(try movedUnkeyed.derive("13579"))
        XCTAssertFalse(movedUnkeyed.matches(try movedUnkeyed.derive("13579", key: prior)))
    }
}
