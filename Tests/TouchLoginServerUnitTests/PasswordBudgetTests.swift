import Crypto
import Foundation
@testable import TouchLoginServer
import WebAuthn
import XCTest

/// Whose records a typed password is judged on (`PasswordBudget`), as a table.
final class PasswordBudgetTests: XCTestCase {
    let key = SymmetricKey(size: .bits256)
    let limits = RateLimits()

    func testEachBudgetKeepsItsOwnRecordsAndSchedule() {
        let anyone = PasswordBudget.anyone(username: "carol", addressKey: "203.0.113.9")
        let session = PasswordBudget.session(tokenHash: Data([1, 2, 3]))
        let client = PasswordBudget.knownClient(nonce: Data([4, 5, 6]))
        XCTAssertEqual(anyone.keys, ["password carol", "password carol from 203.0.113.9"])
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
        ]
        for (budget, records, expected) in rows {
            XCTAssertEqual(budget.decide(records, limits, at: 1000), expected, "\(budget) \(records)")
        }
    }

    func testOnlyATokenMadeForThisNameByThisDeploymentIsAKnownClient() throws {
        let token = PasswordBudget.newClientToken(username: "carol", key: key)
        guard case .knownClient(let nonce) = PasswordBudget.login(username: "carol", addressKey: "a", clientToken: token, key: key) else {
            return XCTFail("the name's own token")
        }
        XCTAssertEqual(nonce.count, 16)
        let anyone = PasswordBudget.anyone(username: "carol", addressKey: "a")
        var flipped = try XCTUnwrap(Data(base64URLEncoded: token))
        flipped[20] ^= 1
        for other in [nil, "", "not base64 !", flipped.base64URLEncodedString(), PasswordBudget.newClientToken(username: "dave", key: key),
                      PasswordBudget.newClientToken(username: "carol", key: SymmetricKey(size: .bits256)), token + token] {
            XCTAssertEqual(PasswordBudget.login(username: "carol", addressKey: "a", clientToken: other, key: key), anyone, "\(other ?? "nil")")
        }
    }
}
