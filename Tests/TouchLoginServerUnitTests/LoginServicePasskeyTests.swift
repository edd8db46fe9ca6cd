import Foundation
import TouchLoginAPI
import TouchLoginTestSupport
import XCTest

@testable import TouchLoginServer

/// Passkey logins behind a shared address: each test is an attack that worked before its rule.
final class LoginServicePasskeyTests: XCTestCase {
    let shared = "203.0.113.1"  // a NAT: a forger and honest users behind one address

    /// Before: ten refused assertions from one address blocked passkey logins for everyone behind
    /// it for 30 s, with no username needed. Now the forger spends only the budget of the
    /// credential they claim.
    func testAForgerBehindASharedAddressSpendsOnlyTheirOwnBudget() async throws {
        let h = try await LoginServiceHarness()
        var carol = try await h.bindPasskey(token: try await h.signUp("carol").token)
        var dave = try await h.bindPasskey(token: try await h.signUp("dave").token)
        var forger = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
        for _ in 0..<10 {
            let code = await LoginServiceHarness.code {
                try await h.passkeyLogin(&forger, username: "carol", claiming: carol.credentialID, from: self.shared)
            }
            XCTAssertNotNil(code, "a forged assertion is refused")
        }
        for _ in 0..<10 {
            let code = await LoginServiceHarness.code {
                try await h.passkeyLogin(&forger, username: nil, from: self.shared)
            }
            XCTAssertEqual(code, "unknown_credential")
        }
        let daveIn = try await h.passkeyLogin(&dave, username: "dave", from: shared)
        XCTAssertEqual(daveIn.method, "passkey", "another user behind the same address is not blocked")
        let stillForging = await LoginServiceHarness.code {
            try await h.passkeyLogin(&forger, username: "carol", claiming: carol.credentialID, from: self.shared)
        }
        XCTAssertEqual(
            stillForging,
            "rate_limited",
            "the forger's claim on that credential, from that address, is what slows down"
        )
        let carolElsewhere = try await h.passkeyLogin(&carol, username: "carol", from: "198.51.100.7")
        XCTAssertEqual(carolElsewhere.method, "passkey")
    }
}
