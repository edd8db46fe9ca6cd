import Foundation
import TouchLoginAPI
import TouchLoginTestSupport
import XCTest

@testable import TouchLoginServer

/// Passwords typed by the owner, against an attacker who knows only the username and fails on
/// it from elsewhere: each test is an attack that worked before its rule.
final class LoginServiceAccountsTests: XCTestCase {
    let attacker = "203.0.113.66"
    let owner = "198.51.100.7"

    /// Before: after a passkey login, the password re-entry that binding a device needs got 429
    /// for as long as the attacker kept failing passwords on the name. Now the session's own
    /// budget judges it; the attacker's failures still wait.
    func testTheAttackersFailuresDoNotThrottleTheOwnersStepUp() async throws {
        let h = try await LoginServiceHarness()
        var passkey = try await h.bindPasskey(token: try await h.signUp("carol", from: owner).token, from: owner)
        for _ in 0..<6 {
            _ = await LoginServiceHarness.code { try await h.passwordLogin("carol", "guess", from: self.attacker) }
        }
        let attackerWaits = await LoginServiceHarness.code {
            try await h.passwordLogin("carol", "guess", from: "192.0.2.200")
        }
        XCTAssertEqual(attackerWaits, "rate_limited", "the name's wait is there, from any address")
        let (session, account) = try await h.service.authenticate(
            bearer: try await h.passkeyLogin(&passkey, username: "carol", from: owner).token
        )
        // The passkey login cleared the name's record; the attacker, from many addresses, fills it again at once.
        for n in 0..<6 {
            _ = await LoginServiceHarness.code { try await h.passwordLogin("carol", "guess", from: "203.0.113.\(n)") }
        }
        let stepUp = await LoginServiceHarness.code {
            try await h.service.confirmPassword(
                session: session,
                account: account,
                PasswordConfirmationRequest(password: "correct horse"),
                address: self.owner
            )
        }
        XCTAssertNil(stepUp, "the owner's step-up in their passkey session is not the attacker's to throttle")
        let change = await LoginServiceHarness.code {
            try await h.service.changePassword(
                session: session,
                account: account,
                PasswordChangeRequest(currentPassword: "correct horse", newPassword: "a new long passphrase"),
                address: self.owner
            )
        }
        XCTAssertNil(change, "nor is a password change with the current password")
        for _ in 0..<6 {
            _ = await LoginServiceHarness.code { try await h.passwordLogin("carol", "guess", from: self.attacker) }
        }
        let stillWaits = await LoginServiceHarness.code {
            try await h.passwordLogin("carol", "guess", from: self.attacker)
        }
        XCTAssertEqual(stillWaits, "rate_limited", "the attacker's failures still wait")
    }

    /// A session's own budget is a budget: a thief with a session token (and no password) gets
    /// 5 free guesses, then waits, then none after 10 — whatever the username's record says.
    func testASessionsOwnBudgetWaitsThenLocks() async throws {
        let h = try await LoginServiceHarness()
        let (session, account) = try await h.service.authenticate(
            bearer: try await h.signUp("carol", from: owner).token
        )
        func stepUp(_ password: String) async -> String? {
            await LoginServiceHarness.code {
                try await h.service.confirmPassword(
                    session: session,
                    account: account,
                    PasswordConfirmationRequest(password: password),
                    address: self.attacker
                )
            }
        }
        var codes: [String?] = []
        for _ in 0..<6 { codes.append(await stepUp("guess")) }
        XCTAssertEqual(codes, Array(repeating: "invalid_credentials", count: 5) + ["rate_limited"])
        var locked: String?
        for _ in 0..<20 {
            h.clock.advance(by: 61)
            locked = await stepUp("guess")
            if locked == "password_locked" { break }
        }
        XCTAssertEqual(locked, "password_locked", "a session's budget ends")
        let right = await stepUp("correct horse")
        XCTAssertEqual(right, "password_locked", "even for the right password, in that session")
        _ = try await h.passwordLogin("carol", "correct horse", from: owner)
    }

    /// Before: a password-only account that reached the 100-failure lock stayed locked until the
    /// operator lifted it. Now a client that signed in with the password before (its client token)
    /// still gets in, and lifts the lock; the attacker, without a token, stays locked out.
    func testAClientThatSignedInBeforeIsTheWayBackFromTheLock() async throws {
        let h = try await LoginServiceHarness()
        let first = try await h.signUp("carol", from: owner)
        let signUpToken = try XCTUnwrap(first.clientToken, "sign-up gives the client its token")
        let login = try await h.service.passwordLogin(
            PasswordLoginRequest(username: "carol", password: "correct horse", clientToken: signUpToken),
            address: owner
        )
        let clientToken = try XCTUnwrap(login.clientToken)
        XCTAssertNotEqual(clientToken, signUpToken, "each password login gives a new one")
        var failures = 0
        while failures < 200 {
            switch await LoginServiceHarness.code({
                try await h.passwordLogin("carol", "guess-\(failures)", from: "203.0.113.\(failures % 200)")
            }) {
            case "invalid_credentials": failures += 1
            case "rate_limited": h.clock.advance(by: 900)
            case let code:
                XCTAssertEqual(code, "password_locked")
                failures = 1000
            }
        }
        let lockedOut = await LoginServiceHarness.code {
            try await h.passwordLogin("carol", "correct horse", from: self.owner)
        }
        XCTAssertEqual(lockedOut, "password_locked", "without a token the lock holds, for the owner too")
        let forged = PasswordLoginRequest(
            username: "carol",
            password: "correct horse",
            clientToken: Data(count: 32).base64URLEncodedString()
        )
        let forgedCode = await LoginServiceHarness.code {
            try await h.service.passwordLogin(forged, address: self.attacker)
        }
        XCTAssertEqual(forgedCode, "password_locked", "a made-up token is no token")
        let otherName = try await h.signUp("dave", from: attacker)
        let borrowed = PasswordLoginRequest(
            username: "carol",
            password: "correct horse",
            clientToken: otherName.clientToken
        )
        let borrowedCode = await LoginServiceHarness.code {
            try await h.service.passwordLogin(borrowed, address: self.attacker)
        }
        XCTAssertEqual(borrowedCode, "password_locked", "another name's token is no token for this one")

        let back = try await h.service.passwordLogin(
            PasswordLoginRequest(username: "carol", password: "correct horse", clientToken: clientToken),
            address: owner
        )
        XCTAssertEqual(back.method, "password", "the owner's client signs in through the lock")
        let lifted = await LoginServiceHarness.code {
            try await h.passwordLogin("carol", "correct horse", from: self.owner)
        }
        XCTAssertNil(lifted, "and its success lifted the name's lock, as a passkey login does")
    }

    /// A stolen client token is worth 10 guesses, not a way around the name's limits.
    func testAClientTokensOwnBudgetEnds() async throws {
        let h = try await LoginServiceHarness()
        let signUp = try await h.signUp("carol", from: owner)
        let stolen = try XCTUnwrap(signUp.clientToken)
        var codes: [String] = []
        while codes.count < 40, codes.last != "password_locked" {
            let code = await LoginServiceHarness.code {
                try await h.service.passwordLogin(
                    PasswordLoginRequest(username: "carol", password: "guess", clientToken: stolen),
                    address: self.attacker
                )
            }
            if code == "rate_limited" { h.clock.advance(by: 61) } else { codes.append(code ?? "signed in") }
        }
        XCTAssertEqual(codes, Array(repeating: "invalid_credentials", count: 10) + ["password_locked"])
        let owner = await LoginServiceHarness.code {
            try await h.passwordLogin("carol", "correct horse", from: self.owner)
        }
        XCTAssertNil(owner, "the thief's failures on the token were not the name's")
    }

    /// Tokens gathered while the password was known buy no guesses at the next one: a password
    /// change voids every token given before it.
    func testAPasswordChangeVoidsEarlierClientTokens() async throws {
        let h = try await LoginServiceHarness()
        try await h.signUp("dora", from: owner)
        let thief = try await h.passwordLogin("dora", "correct horse", from: attacker)
        let stolen = try XCTUnwrap(thief.clientToken)
        let (session, account) = try await h.service.authenticate(
            bearer: try await h.passwordLogin("dora", "correct horse", from: owner).token
        )
        try await h.service.changePassword(
            session: session,
            account: account,
            PasswordChangeRequest(currentPassword: "correct horse", newPassword: "a new long passphrase"),
            address: owner
        )
        // The name's own record now makes guesses wait.
        for n in 0..<5 {
            _ = await LoginServiceHarness.code {
                try await h.passwordLogin("dora", "guess-\(n)", from: "203.0.113.\(n)")
            }
        }
        let withOldToken = await LoginServiceHarness.code {
            try await h.service.passwordLogin(
                PasswordLoginRequest(username: "dora", password: "guess", clientToken: stolen),
                address: "203.0.113.99"
            )
        }
        XCTAssertEqual(
            withOldToken,
            "rate_limited",
            "a token from before the change is no token: the guess waits with the name's"
        )
        h.clock.advance(by: 10)
        let again = try await h.service.passwordLogin(
            PasswordLoginRequest(username: "dora", password: "a new long passphrase"),
            address: owner
        )
        let fresh = try XCTUnwrap(again.clientToken)
        let withNewToken = await LoginServiceHarness.code {
            try await h.service.passwordLogin(
                PasswordLoginRequest(username: "dora", password: "guess", clientToken: fresh),
                address: self.owner
            )
        }
        XCTAssertEqual(
            withNewToken,
            "invalid_credentials",
            "one given under the new password is its client's own budget"
        )
    }

    /// A passkey session's step-ups count on its device: signing in again does not renew them.
    func testSigningInAgainWithTheDeviceDoesNotRenewTheStepUpBudget() async throws {
        let h = try await LoginServiceHarness()
        var passkey = try await h.bindPasskey(token: try await h.signUp("carol", from: owner).token, from: owner)
        var codes: [String] = []
        for round in 0..<40 where codes.count < 11 {
            let (session, account) = try await h.service.authenticate(
                bearer: try await h.passkeyLogin(&passkey, username: "carol", from: attacker).token
            )
            let code = await LoginServiceHarness.code {
                try await h.service.confirmPassword(
                    session: session,
                    account: account,
                    PasswordConfirmationRequest(password: "guess-\(round)"),
                    address: self.attacker
                )
            }
            if code == "rate_limited" { h.clock.advance(by: 61) } else { codes.append(code ?? "confirmed") }
        }
        XCTAssertEqual(codes.prefix(10), ArraySlice(Array(repeating: "invalid_credentials", count: 10)), "\(codes)")
        XCTAssertEqual(
            codes.dropFirst(10).first,
            "password_locked",
            "a new session of the same device has no new budget: \(codes)"
        )
    }
}
