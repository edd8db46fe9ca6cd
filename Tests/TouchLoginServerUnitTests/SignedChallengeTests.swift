import Crypto
import Foundation
import XCTest

@testable import TouchLoginServer

final class SignedChallengeTests: XCTestCase {
    let key = SymmetricKey(size: .bits256)
    let challenge = SignedChallenge(
        purpose: .authentication,
        expiresAt: 1_800_000_120.5,
        nonce: Data(repeating: 7, count: 16),
        binding: Data(repeating: 9, count: 16)
    )

    func testOpensWhatItSealed() throws {
        let token = challenge.sealed(with: key)
        XCTAssertEqual(token.count, SignedChallenge.size)
        XCTAssertEqual(try SignedChallenge.open(token, with: key, at: 1_800_000_000), challenge)
        XCTAssertTrue(challenge.isBound)
        XCTAssertFalse(
            SignedChallenge(
                purpose: .authentication,
                expiresAt: 0,
                nonce: Data(count: 16),
                binding: SignedChallenge.unbound
            ).isBound
        )
    }

    func testAnyChangedByteAnotherKeyOrAnotherSizeIsUnknown() {
        let token = challenge.sealed(with: key)
        for index in token.indices {
            var forged = token
            forged[index] ^= 0x01
            XCTAssertThrowsError(try SignedChallenge.open(forged, with: key, at: 0), "byte \(index)") {
                XCTAssertEqual($0 as? SignedChallenge.Problem, .unknown)
            }
        }
        let cases: [(String, Data, SymmetricKey)] = [
            ("another deployment's key", token, SymmetricKey(size: .bits256)), ("shorter", token.dropLast(), key),
            ("longer", token + Data([0]), key), ("empty", Data(), key),
            ("a stored challenge's 32 random bytes", Data(count: 32), key),
        ]
        for (name, data, key) in cases {
            XCTAssertThrowsError(try SignedChallenge.open(data, with: key, at: 0), name) {
                XCTAssertEqual($0 as? SignedChallenge.Problem, .unknown, name)
            }
        }
    }

    func testExpiryToTheMillisecond() {
        let token = challenge.sealed(with: key)
        XCTAssertNoThrow(try SignedChallenge.open(token, with: key, at: 1_800_000_120.499))
        XCTAssertThrowsError(try SignedChallenge.open(token, with: key, at: 1_800_000_120.5)) {
            XCTAssertEqual($0 as? SignedChallenge.Problem, .expired)
        }
    }
}
