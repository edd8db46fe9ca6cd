import Crypto
import Foundation
import WebAuthn
import XCTest

@testable import TouchLoginServer

/// Whose records a typed password is judged on (`PasswordBudget`), as a table.
final class PasswordBudgetTests: XCTestCase {
    let key = SymmetricKey(size: .bits256)
    let limits = RateLimits()

    func testEachBudgetKeepsItsOwnRecordsAndSchedule() {
        let anyone = PasswordBudget.anyone(username: "carol", addressKey: "203.0.113.9")
        let session = PasswordBudget.session(tokenHash: Data([1, 2, 3]))
        let client = PasswordBudget.knownClient(nonce: Data([4, 5, 6]))
        let device = PasswordBudget.device(credentialID: Data([7, 8, 9]))
        XCTAssertEqual(anyone.keys, ["password carol", "password carol from 203.0.113.9"])
        XCTAssertEqual(device.keys, ["password device BwgJ"])
        XCTAssertEqual(session.keys, ["password session AQID"])
        XCTAssertEqual(client.keys, ["password client BAUG"])
        // A success anywhere lifts the name's own record too.
        XCTAssertEqual(session.clearedBySuccess(username: "carol"), ["password carol", "password session AQID"])
        XCTAssertEqual(anyone.clearedBySuccess(username: "carol"), anyone.keys)

        let rows: [(PasswordBudget, [String: FailureRecord], ThrottleDecision)] = [
            (anyone, [:], .admitted),
            (anyone, ["password carol": .init(failures: 100, lastFailureAt: 0)], .locked),
            (anyone, ["password carol from 203.0.113.9": .init(failures: 5, lastFailureAt: 1000)], .wait(seconds: 2)),
            // The name's lock and waits are not a session's or a known client's.
            (session, ["password carol": .init(failures: 100, lastFailureAt: 1000)], .admitted),
            (client, ["password carol": .init(failures: 100, lastFailureAt: 1000)], .admitted),
            (session, ["password session AQID": .init(failures: 5, lastFailureAt: 1000)], .wait(seconds: 5)),
            (client, ["password client BAUG": .init(failures: 10, lastFailureAt: 0)], .locked),
            (device, ["password carol": .init(failures: 100, lastFailureAt: 1000)], .admitted),
            (device, ["password device BwgJ": .init(failures: 10, lastFailureAt: 0)], .locked),
        ]
        for (budget, records, expected) in rows {
            XCTAssertEqual(budget.decide(records, limits, at: 1000), expected, "\(budget) \(records)")
        }
    }

    /// A passkey session's step-ups count on its device; a password session's on itself.
    func testASessionsBudgetIsItsDevicesWhenADeviceSignedItIn() {
        let passkey = Session(
            tokenHash: Data([1]),
            accountID: "a",
            createdAt: 0,
            expiresAt: 1,
            method: "passkey",
            credentialID: Data([2])
        )
        let password = Session(
            tokenHash: Data([3]),
            accountID: "a",
            createdAt: 0,
            expiresAt: 1,
            method: "password",
            passwordVerifiedAt: 0
        )
        XCTAssertEqual(PasswordBudget.inSession(passkey), .device(credentialID: Data([2])))
        XCTAssertEqual(PasswordBudget.inSession(password), .session(tokenHash: Data([3])))
    }

    func testOnlyATokenMadeForThisNameAndPasswordByThisDeploymentIsAKnownClient() throws {
        let hash = "scrypt$10$8$1$c2FsdA$aGFzaA"
        let token = PasswordBudget.newClientToken(username: "carol", passwordHash: hash, key: key)
        guard
            case .knownClient(let nonce) = PasswordBudget.login(
                username: "carol",
                addressKey: "a",
                clientToken: token,
                passwordHash: hash,
                key: key
            )
        else {
            return XCTFail("the name's own token")
        }
        XCTAssertEqual(nonce.count, 16)
        let anyone = PasswordBudget.anyone(username: "carol", addressKey: "a")
        XCTAssertEqual(
            PasswordBudget.login(
                username: "carol",
                addressKey: "a",
                clientToken: token,
                passwordHash: hash + "x",
                key: key
            ),
            anyone,
            "a new password voids the tokens given under the old one"
        )
        var flipped = try XCTUnwrap(Data(base64URLEncoded: token))
        flipped[20] ^= 1
        for other in [
            nil, "", "not base64 !", flipped.base64URLEncodedString(),
            PasswordBudget.newClientToken(username: "dave", passwordHash: hash, key: key),
            PasswordBudget.newClientToken(username: "carol", passwordHash: hash, key: SymmetricKey(size: .bits256)),
            token + token,
        ] {
            XCTAssertEqual(
                PasswordBudget.login(
                    username: "carol",
                    addressKey: "a",
                    clientToken: other,
                    passwordHash: hash,
                    key: key
                ),
                anyone,
                "\(other ?? "nil")"
            )
        }
    }
}
