import Foundation
import TouchLoginAPI
import TouchLoginTestSupport
import WebAuthn
import XCTest

@testable import TouchLoginServer

/// The login service's rules against abuse, driven in-process with a manual clock: each test is an
/// attack that worked before its rule existed.
final class LoginServiceTests: XCTestCase {
    let attacker = "203.0.113.66"
    let owner = "198.51.100.7"

    /// A hash made at a lower cost (before the default rose) is remade at today's on the next right
    /// password, and only then; a hash changed meanwhile is not overwritten. Before, it stayed weak.
    func testAnOlderCheaperHashIsRemadeOnTheNextRightPassword() async throws {
        let h = try await LoginServiceHarness { $0.passwordCost = 11 }
        let old = try PasswordHasher(cost: 10).hash("correct horse")
        try await h.store.createAccount(
            Account(id: "acct-1", username: "dora", passwordHash: old, userHandle: Data(count: 16), createdAt: 0)
        )
        _ = await LoginServiceHarness.code { try await h.passwordLogin("dora", "wrong horse") }
        let afterWrong = try await h.store.account(named: "dora")?.passwordHash
        XCTAssertEqual(afterWrong, old, "a wrong password remakes nothing")
        _ = try await h.passwordLogin("dora", "correct horse")
        let stored = try await h.store.account(named: "dora")?.passwordHash
        let remade = try XCTUnwrap(stored)
        XCTAssertTrue(remade.hasPrefix("scrypt$11$"), remade)
        XCTAssertTrue(PasswordHasher(cost: 11).verify("correct horse", against: remade))
        _ = try await h.passwordLogin("dora", "correct horse")
        let replaced = try await h.store.rehashPassword(accountID: "acct-1", from: old, to: "scrypt$11$stale")
        XCTAssertFalse(replaced, "compare-and-set: the hash is no longer the old one")
    }

    /// The operator finds an account and revokes a lost device: its passkey login ends at once and
    /// the account's activity says the operator did it.
    func testTheOperatorLooksAnAccountUpAndRevokesADevice() async throws {
        let h = try await LoginServiceHarness()
        var passkey = try await h.bindPasskey(token: try await h.signUp("gina").token, name: "laptop")
        let laptopSession = try await h.passkeyLogin(&passkey, username: "gina")
        let before = try await h.service.operatorAccount(username: "gina")
        XCTAssertEqual(before.devices.map(\.name), ["laptop"])
        let id = try XCTUnwrap(before.devices.first?.id)
        let revoked = try await h.service.operatorRevoke(username: "gina", credentialID: id)
        XCTAssertEqual(revoked.name, "laptop")
        let login = await LoginServiceHarness.code { try await h.passkeyLogin(&passkey, username: "gina") }
        XCTAssertNotNil(login, "the revoked device still signed in")
        let stillIn = await LoginServiceHarness.code { try await h.service.authenticate(bearer: laptopSession.token) }
        XCTAssertEqual(stillIn, "unauthorized", "the lost laptop's session ended with its device")
        let after = try await h.service.operatorAccount(username: "gina")
        XCTAssertEqual(after.devices, [])
        XCTAssertEqual(after.activity?.first?.kind, "device-revoked")
        XCTAssertEqual(after.activity?.first?.address, "operator")
        let unknownAccount = await LoginServiceHarness.code { try await h.service.operatorAccount(username: "nobody") }
        XCTAssertEqual(unknownAccount, "not_found")
        let unknownDevice = await LoginServiceHarness.code {
            try await h.service.operatorRevoke(username: "gina", credentialID: id)
        }
        XCTAssertEqual(unknownDevice, "not_found")
    }

    /// Without a username the credential alone names the account: the authenticator must say
    /// whose it is (WebAuthn §7.2 step 6), and say it right.
    func testALoginWithoutAUsernameNeedsTheAccountsUserHandle() async throws {
        let h = try await LoginServiceHarness()
        var carol = try await h.bindPasskey(token: try await h.signUp("carol").token)
        let account = try await h.store.account(named: "carol")
        let handle = try XCTUnwrap(account).userHandle
        func login(_ userHandle: Data?) async -> String? {
            await LoginServiceHarness.code {
                let options = try await h.service.assertionOptions(
                    AssertionOptionsRequest(username: nil),
                    address: self.owner
                )
                let credential = try carol.assertion(challenge: options.publicKey.challenge, userHandle: userHandle)
                return try await h.service.passkeyLogin(AssertionRequest(credential: credential), address: self.owner)
            }
        }
        let without = await login(nil)
        let wrong = await login(Data(repeating: 1, count: handle.count))
        let right = await login(handle)
        XCTAssertEqual(without, "credential_id_mismatch", "no userHandle")
        XCTAssertEqual(wrong, "credential_id_mismatch", "another account's userHandle")
        XCTAssertNil(right, "the account's own userHandle signs in")
    }

    /// The operator's lift reopens the password path from everywhere, the owner's own address
    /// included (where the owner's own mistakes slowed it down).
    func testTheOperatorsLiftEndsEveryWaitOfThatAccount() async throws {
        let h = try await LoginServiceHarness()
        try await h.signUp("carol")
        for _ in 0..<6 {
            _ = await LoginServiceHarness.code { try await h.passwordLogin("carol", "typo", from: self.owner) }
        }
        let slowed = await LoginServiceHarness.code {
            try await h.passwordLogin("carol", "correct horse", from: self.owner)
        }
        XCTAssertEqual(slowed, "rate_limited")
        try await h.service.liftPasswordLock(username: "Carol")
        let afterLift = await LoginServiceHarness.code {
            try await h.passwordLogin("carol", "correct horse", from: self.owner)
        }
        XCTAssertNil(afterLift, "the lift ended the wait at the owner's address too")
    }

    func testWrongPasswordsNeverBlockTheOwnersPasskey() async throws {
        let h = try await LoginServiceHarness()
        var passkey = try await h.bindPasskey(token: try await h.signUp("carol").token)
        for _ in 0..<12 {
            _ = await LoginServiceHarness.code { try await h.passwordLogin("carol", "guess", from: self.attacker) }
        }
        let session = try await h.passkeyLogin(&passkey, username: "carol", from: owner)
        XCTAssertEqual(session.method, "passkey")
    }

    func testAssertionsSignedByAnotherKeyUnderALeakedCredentialIDDoNotLockTheOwnerOut() async throws {
        let h = try await LoginServiceHarness()
        var passkey = try await h.bindPasskey(token: try await h.signUp("carol").token)
        var forger = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
        for _ in 0..<10 {
            let code = await LoginServiceHarness.code {
                try await h.passkeyLogin(
                    &forger,
                    username: "carol",
                    claiming: passkey.credentialID,
                    from: self.attacker
                )
            }
            XCTAssertNotNil(code, "a forged assertion is refused")
        }
        let session = try await h.passkeyLogin(&passkey, username: "carol", from: owner)
        XCTAssertEqual(session.method, "passkey")
        let stillForging = await LoginServiceHarness.code {
            try await h.passkeyLogin(&forger, username: "carol", claiming: passkey.credentialID, from: self.attacker)
        }
        XCTAssertEqual(stillForging, "rate_limited", "the forger's own address is what slows down")
    }

    func testPasskeyOptionsLookTheSameWhetherTheAccountExistsOrNot() async throws {
        let h = try await LoginServiceHarness()
        // as the enclave client registers
        _ = try await h.bindPasskey(token: try await h.signUp("carol").token, transports: ["internal"])
        try await h.signUp("dave")  // an account without a passkey
        func entries(_ name: String) async throws -> [PublicKeyCredentialDescriptorJSON] {
            try await h.service.assertionOptions(AssertionOptionsRequest(username: name), address: attacker).publicKey
                .allowCredentials ?? []
        }
        func allowed(_ name: String) async throws -> [String] { try await entries(name).map(\.id) }
        let real = try await allowed("carol")
        let noPasskey = try await allowed("dave")
        let unknown = try await allowed("nobody")
        let shapes = try await [entries("carol"), entries("dave"), entries("nobody")].map {
            $0.map { [$0.type] + ($0.transports ?? []) }
        }
        XCTAssertEqual(Set(shapes).count, 1, "every entry has the shape of an enclave device's: \(shapes)")
        XCTAssertEqual(real.count, 1)
        XCTAssertEqual(noPasskey.count, real.count, "an account without a passkey answers like one with")
        XCTAssertEqual(unknown.count, real.count, "an unknown name answers like a real one")
        XCTAssertEqual(
            unknown.first.flatMap { Data(base64URLEncoded: $0) }?.count,
            real.first.flatMap { Data(base64URLEncoded: $0) }?.count
        )
        let again = try await allowed("nobody")
        XCTAssertEqual(again, unknown, "the decoy is stable, as a real credential ID is")
        let other = try await allowed("nobody-else")
        XCTAssertNotEqual(other, unknown)
    }

    /// An attacker asks for a name's options, then answers with a key of its own under the listed
    /// ID — under that name's challenge, a challenge for no name, or another name's — in every way
    /// an assertion can be wrong: each answer (code and message) must be the same whether the name
    /// is an account with a device, an account without one, or no account (a decoy is listed).
    func testAnsweringTheOptionsTellsNoMoreThanTheOptions() async throws {
        let h = try await LoginServiceHarness()
        var carol = try await h.bindPasskey(token: try await h.signUp("carol").token)
        for _ in 0..<3 { _ = try await h.passkeyLogin(&carol, username: "carol", from: owner) }  // a counter above zero
        try await h.signUp("dave")  // an account without a device
        typealias Variant = (String, @Sendable (inout SoftwareAuthenticator) -> Void, String?, UInt32?, Data?)
        let variants: [Variant] = [
            ("another key", { _ in }, nil, nil, nil),
            ("another relying party", { $0.rpID = "evil.example" }, nil, nil, nil),
            ("another origin", { _ in }, "https://evil.example", nil, nil),
            ("no user verification", { $0.flags = [.userPresent] }, nil, nil, nil),
            ("a counter of zero", { _ in }, nil, 0, nil),
            ("a user handle", { _ in }, nil, nil, Data(repeating: 7, count: 32)),
        ]
        enum Challenge: CaseIterable { case thatName, noName, anotherName }
        var address = 0
        func answer(_ name: String, _ variant: Variant, under challenge: Challenge) async -> String {
            address += 1
            let from = "203.0.113.\(address)"
            do {
                var forger = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
                variant.1(&forger)
                let listed = try await h.service.assertionOptions(
                    AssertionOptionsRequest(username: name),
                    address: from
                )
                let id = try XCTUnwrap(
                    listed.publicKey.allowCredentials?.first.flatMap { Data(base64URLEncoded: $0.id) }
                )
                let asked: String? =
                    switch challenge {
                    case .thatName: name
                    case .noName: nil
                    case .anotherName: "erin"
                    }
                let options = try await h.service.assertionOptions(
                    AssertionOptionsRequest(username: asked),
                    address: from
                )
                let credential = try forger.assertion(
                    challenge: options.publicKey.challenge,
                    origin: variant.2,
                    counter: variant.3,
                    as: id,
                    userHandle: variant.4
                )
                _ = try await h.service.passkeyLogin(AssertionRequest(credential: credential), address: from)
                return "signed in"
            } catch let e as APIError {
                return "\(e.code): \(e.message)"
            } catch {
                return "\(error)"
            }
        }
        for variant in variants {
            for challenge in Challenge.allCases {
                let real = await answer("carol", variant, under: challenge)
                let withoutDevice = await answer("dave", variant, under: challenge)
                let unknown = await answer("nobody", variant, under: challenge)
                XCTAssertNotEqual(real, "signed in", variant.0)
                XCTAssertEqual(
                    withoutDevice,
                    real,
                    "\(variant.0), \(challenge): an account without a device answers as one with"
                )
                XCTAssertEqual(unknown, real, "\(variant.0), \(challenge): an unknown name answers as an account does")
            }
        }
    }

    /// Registering a credential under a listed ID: a decoy's is "taken", as a real device's is.
    func testRegisteringAListedIDTellsNothing() async throws {
        let h = try await LoginServiceHarness()
        _ = try await h.bindPasskey(token: try await h.signUp("carol").token)
        let attacker = try await h.signUp("mallory")
        func listed(_ name: String) async throws -> Data {
            let options = try await h.service.assertionOptions(
                AssertionOptionsRequest(username: name),
                address: self.attacker
            )
            return try XCTUnwrap(options.publicKey.allowCredentials?.first.flatMap { Data(base64URLEncoded: $0.id) })
        }
        var answers: [String?] = []
        for name in ["carol", "nobody"] {
            let id = try await listed(name)
            answers.append(
                await LoginServiceHarness.code {
                    try await h.bindPasskey(
                        token: attacker.token,
                        name: name,
                        authenticator: SoftwareAuthenticator(origin: LoginServiceHarness.origin, credentialID: id)
                    )
                }
            )
        }
        XCTAssertEqual(answers, ["credential_exists", "credential_exists"])
    }

    func testFailedPasswordsAnswerTheSameForUnknownUsernames() async throws {
        let h = try await LoginServiceHarness()
        try await h.signUp("carol")
        var known: [String?] = []
        var unknown: [String?] = []
        for _ in 0..<8 {
            known.append(
                await LoginServiceHarness.code { try await h.passwordLogin("carol", "guess", from: self.attacker) }
            )
            unknown.append(
                await LoginServiceHarness.code { try await h.passwordLogin("nobody", "guess", from: self.attacker) }
            )
        }
        XCTAssertEqual(known, unknown)
        XCTAssertTrue(known.contains("rate_limited"), "\(known)")
    }

    func testPasswordGuessingIsBoundedPerAccount() async throws {
        let h = try await LoginServiceHarness()
        try await h.signUp("carol")
        // A patient attacker for a simulated day: every refusal waits exactly as long as told.
        var guesses = 0
        let end = h.clock.now + 86_400
        while h.clock.now < end {
            do {
                _ = try await h.passwordLogin("carol", "guess-\(guesses)", from: "203.0.113.\(guesses % 200)")
                XCTFail("a wrong password was accepted")
            } catch let limited as LoginServerError where limited.retryAfter != nil {
                h.clock.advance(by: Double(limited.retryAfter ?? 0))
            } catch let e as APIError where e.code == "invalid_credentials" {
                guesses += 1
            } catch let e as APIError where e.code == "password_locked" {
                break
            }
        }
        XCTAssertLessThanOrEqual(guesses, 100, "at most 100 consecutive failures per account (NIST SP 800-63B)")
        let right = await LoginServiceHarness.code {
            try await h.passwordLogin("carol", "correct horse", from: self.owner)
        }
        XCTAssertEqual(right, "password_locked", "after that the password path waits for a reset")
    }

    func testAPasskeySessionCanNeitherBindNorRevokeDevices() async throws {
        let h = try await LoginServiceHarness()
        var passkey = try await h.bindPasskey(token: try await h.signUp("carol").token)
        let laptop = try await h.bindPasskey(
            token: try await h.passwordLogin("carol", "correct horse").token,
            name: "laptop"
        )
        let stolen = try await h.passkeyLogin(&passkey, username: "carol")
        let (session, account) = try await h.service.authenticate(bearer: stolen.token)
        let bind = await LoginServiceHarness.code {
            try await h.service.registrationOptions(
                session: session,
                account: account,
                RegistrationOptionsRequest(deviceName: "attacker")
            )
        }
        XCTAssertEqual(bind, "step_up_required")
        let revoke = await LoginServiceHarness.code {
            try await h.service.revoke(
                session: session,
                account: account,
                credentialID: laptop.credentialID.base64URLEncodedString(),
                address: self.attacker
            )
        }
        XCTAssertEqual(revoke, "step_up_required")
        let devices = try await h.service.devices(of: account)
        XCTAssertEqual(devices.count, 2)
    }

    func testExpiredSessionsAndIdleFailuresAreRemoved() async throws {
        let h = try await LoginServiceHarness()
        let session = try await h.signUp("carol")
        _ = await LoginServiceHarness.code { try await h.passwordLogin("nobody", "guess") }
        h.clock.advance(by: h.service.configuration.sessionLifetime + 1)
        try await h.service.removeExpired()
        let stored = try await h.service.store.session(tokenHash: LoginService.tokenHash(session.token))
        XCTAssertNil(stored, "an expired session is removed")
        let keys = PasswordBudget.anyone(username: "nobody", addressKey: "192.0.2.1").keys
        let kept = try await h.service.store.admitAttempt(keys: keys, at: h.clock.now) { records in
            records.isEmpty ? .locked : .admitted
        }
        XCTAssertEqual(kept, .admitted, "a failure an hour old is kept")
        h.clock.advance(by: h.service.configuration.failureMemory + 1)
        try await h.service.removeExpired()
        let forgotten = try await h.service.store.admitAttempt(keys: keys, at: h.clock.now) { records in
            records.isEmpty ? .locked : .admitted
        }
        XCTAssertEqual(forgotten, .locked, "a month-idle failure record is forgotten")
    }

    func testTheOwnerSeesSignInsAndDeviceChangesAndIsToldOfANewDevice() async throws {
        let h = try await LoginServiceHarness()
        var phone = try await h.bindPasskey(
            token: try await h.signUp("carol", from: owner).token,
            name: "phone",
            from: owner
        )
        h.clock.advance(by: 10)
        let first = try await h.passkeyLogin(&phone, username: "carol", from: owner)
        XCTAssertEqual(first.newDevices ?? [], [])
        // Someone with the password binds a device of their own…
        h.clock.advance(by: 10)
        let stolen = try await h.passwordLogin("carol", "correct horse", from: attacker)
        _ = try await h.bindPasskey(token: stolen.token, name: "not mine", from: attacker)
        // …and the owner's phone is told at its next login, once.
        h.clock.advance(by: 10)
        let next = try await h.passkeyLogin(&phone, username: "carol", from: owner)
        XCTAssertEqual(next.newDevices?.map(\.name), ["not mine"])
        h.clock.advance(by: 10)
        let after = try await h.passkeyLogin(&phone, username: "carol", from: owner)
        XCTAssertEqual(after.newDevices ?? [], [])

        let (_, account) = try await h.service.authenticate(bearer: after.token)
        let activity = try await h.service.accountInfo(account).activity ?? []
        XCTAssertEqual(
            activity.map(\.kind),
            [
                "passkey-login", "passkey-login", "device-added", "password-login", "passkey-login", "device-added",
                "sign-up",
            ]
        )
        XCTAssertEqual(activity.map(\.address), [owner, owner, attacker, attacker, owner, owner, owner])
        XCTAssertEqual(activity[2].deviceName, "not mine")
    }

    func testDeviceNamesWithControlOrFormatCharactersAreRefused() throws {
        for bad in [
            "\u{1B}]0;owned\u{7}", "gpj\u{202E}exe.txt", "a\u{200B}b", "line\nbreak", String(repeating: "x", count: 65),
        ] {
            XCTAssertThrowsError(try LoginService.deviceName(bad), bad.debugDescription)
        }
        XCTAssertEqual(try LoginService.deviceName("  Carol’s phone ☎ "), "Carol’s phone ☎")
        XCTAssertNil(try LoginService.deviceName("   "))
    }

    func testADeviceKeepsWhatItsAuthenticatorSaidAndIsRenamedOnlyAfterAStepUp() async throws {
        let h = try await LoginServiceHarness()
        var made = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
        made.flags = [.userPresent, .userVerified, .backupEligible, .backedUp]
        made.aaguid = Data((1...16).map { UInt8($0) })
        let token = try await h.signUp("carol").token
        var passkey = try await h.bindPasskey(
            token: token,
            authenticator: made,
            transports: ["internal", "hybrid", "bogus"]
        )
        let (session, account) = try await h.service.authenticate(bearer: token)
        var device = try await h.service.devices(of: account)[0]
        XCTAssertEqual(device.aaguid, "01020304-0506-0708-090a-0b0c0d0e0f10")
        XCTAssertEqual(device.transports, ["internal", "hybrid"], "only transports WebAuthn names")
        XCTAssertEqual([device.backupEligible, device.backedUp, device.userVerified], [true, true, true])
        let options = try await h.service.assertionOptions(
            AssertionOptionsRequest(username: "carol"),
            address: attacker
        )
        XCTAssertEqual(
            options.publicKey.allowCredentials?.first?.transports,
            ["internal", "hybrid"],
            "the browser is told how to reach it"
        )

        passkey.flags = [.userPresent, .userVerified, .backupEligible]
        _ = try await h.passkeyLogin(&passkey, username: "carol")
        device = try await h.service.devices(of: account)[0]
        XCTAssertEqual(device.backedUp, false, "BS follows the last login")
        passkey.flags = [.userPresent, .userVerified]
        let changedBE = await LoginServiceHarness.code { try await h.passkeyLogin(&passkey, username: "carol") }
        XCTAssertEqual(changedBE, "credential_id_mismatch", "BE never changes for a credential")

        let renamed = try await h.service.rename(
            session: session,
            account: account,
            credentialID: device.id,
            RenameDeviceRequest(name: "work phone")
        )
        XCTAssertEqual(renamed.name, "work phone")
        passkey.flags = [.userPresent, .userVerified, .backupEligible]
        let (passkeySession, _) = try await h.service.authenticate(
            bearer: try await h.passkeyLogin(&passkey, username: "carol").token
        )
        let disguise = await LoginServiceHarness.code {
            try await h.service.rename(
                session: passkeySession,
                account: account,
                credentialID: device.id,
                RenameDeviceRequest(name: "phone")
            )
        }
        XCTAssertEqual(disguise, "step_up_required")
    }

    func testChangingThePasswordSignsOutEveryOtherSession() async throws {
        let h = try await LoginServiceHarness()
        let mine = try await h.signUp("carol", from: owner)
        var passkey = try await h.bindPasskey(token: mine.token, from: owner)
        let thief = try await h.passwordLogin("carol", "correct horse", from: attacker)
        let (session, account) = try await h.service.authenticate(bearer: mine.token)
        func change(_ current: String?, _ new: String, in session: Session) async -> String? {
            await LoginServiceHarness.code {
                try await h.service.changePassword(
                    session: session,
                    account: account,
                    PasswordChangeRequest(currentPassword: current, newPassword: new),
                    address: self.owner
                )
            }
        }
        let wrongCurrent = await change("guess", "new long passphrase", in: session)
        XCTAssertEqual(wrongCurrent, "invalid_credentials")
        let weak = await change("correct horse", "short", in: session)
        XCTAssertEqual(weak, "weak_password")
        let (passkeySession, _) = try await h.service.authenticate(
            bearer: try await h.passkeyLogin(&passkey, username: "carol", from: owner).token
        )
        let withoutProof = await change(nil, "new long passphrase", in: passkeySession)
        XCTAssertEqual(withoutProof, "step_up_required")

        let changed = await change("correct horse", "new long passphrase", in: session)
        XCTAssertNil(changed)
        let thiefAfter = await LoginServiceHarness.code { try await h.service.authenticate(bearer: thief.token) }
        XCTAssertEqual(thiefAfter, "unauthorized", "whoever knew the old password is signed out")
        _ = try await h.service.authenticate(bearer: mine.token)
        let old = await LoginServiceHarness.code {
            try await h.passwordLogin("carol", "correct horse", from: self.owner)
        }
        XCTAssertEqual(old, "invalid_credentials")
        _ = try await h.passwordLogin("carol", "new long passphrase", from: owner)
        let activity = try await h.service.accountInfo(account).activity ?? []
        XCTAssertTrue(activity.contains { $0.kind == "password-changed" && $0.address == owner })
    }
}
