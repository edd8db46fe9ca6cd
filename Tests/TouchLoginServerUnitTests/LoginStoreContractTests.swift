import Foundation
import Logging
import PostgresNIO
import Synchronization
import XCTest

@testable import TouchLoginServer

/// What every `LoginStore` promises, checked against SQLite and (when scripts/test provides one)
/// PostgreSQL: the same cases, the same answers.
final class LoginStoreContractTests: XCTestCase {
    /// Each store in a fresh database; `body` runs once per store.
    func forEachStore(_ body: (String, any LoginStore) async throws -> Void) async throws {
        let directory = NSTemporaryDirectory() + "login-store-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sqlite = try SQLiteLoginStore(path: directory + "/server.sqlite")
        try await sqlite.migrate()
        try await body("sqlite", sqlite)

        guard let admin = ProcessInfo.processInfo.environment["TOUCHLOGIN_TEST_POSTGRES"], !admin.isEmpty else {
            return
        }
        let name = "touchlogin_contract_\(UInt32.random(in: 0...UInt32.max))"
        let logger = Logger(label: "contract")
        let adminClient = try PostgresLoginStore.client(url: admin)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await adminClient.run() }
            try await adminClient.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
            do {
                let client = try PostgresLoginStore.client(
                    url: admin.replacingOccurrences(of: "/postgres", with: "/\(name)")
                )
                try await withThrowingTaskGroup(of: Void.self) { inner in
                    inner.addTask { await client.run() }
                    let store = PostgresLoginStore(client: client, logger: logger)
                    try await store.migrate()
                    defer { inner.cancelAll() }
                    try await body("postgresql", store)
                }
            } catch {
                _ = try? await adminClient.query(
                    PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"),
                    logger: logger
                )
                group.cancelAll()
                throw error
            }
            try await adminClient.query(
                PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"),
                logger: logger
            )
            group.cancelAll()
        }
    }

    func account(_ name: String) -> Account {
        Account(
            id: UUID().uuidString,
            username: name,
            passwordHash: "scrypt$x",
            userHandle: Data(UUID().uuidString.utf8),
            createdAt: 1
        )
    }

    func event(_ account: Account, _ kind: AccountEvent.Kind, at: Double = 1) -> AccountEvent {
        AccountEvent(accountID: account.id, at: at, kind: kind, address: "192.0.2.1")
    }

    func credential(of account: Account, count: UInt32 = 0) -> Credential {
        var credential = Credential(
            id: Data(UUID().uuidString.utf8),
            accountID: account.id,
            publicKey: Data([1, 2, 3]),
            signCount: count,
            name: "key",
            attestationFormat: "none",
            createdAt: 2,
            lastUsedAt: nil,
            aaguid: Data(repeating: 0xab, count: 16),
            transports: ["internal", "hybrid"]
        )
        credential.backupEligible = true
        credential.userVerifiedAtRegistration = true
        return credential
    }

    /// A new account with one device whose counter is at `count`.
    func enrolled(_ name: String, count: UInt32, in store: any LoginStore) async throws -> (Account, Credential) {
        let owner = account(name)
        let key = credential(of: owner, count: count)
        try await store.createAccount(owner)
        try await store.addCredential(key, event: event(owner, .deviceAdded))
        return (owner, key)
    }

    func testParallelAttemptsAreCountedBeforeTheyAreChecked() async throws {
        try await forEachStore { kind, store in
            let schedule = FailureSchedule(freeFailures: 5, firstDelay: 1000, maxDelay: 1000)
            let keys = ["password carol", "password carol from 192.0.2.1"]
            let admitted = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        try await store.admitAttempt(keys: keys, at: 100) { records in
                            schedule.decide(records[keys[0]], at: 100)
                        } == .admitted
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            XCTAssertEqual(admitted, 5, "\(kind): twenty at once, and only the free five got through")
            try await store.clearFailures(keys: keys)
            let again = try await store.admitAttempt(keys: keys, at: 100) { records in
                records.isEmpty ? .admitted : .locked
            }
            XCTAssertEqual(again, .admitted, "\(kind): a success clears the count")

            let perAddress = [
                "password c_rol from 192.0.2.1", "password c_rol from 2001:db8::/64", "password carol from 192.0.2.1",
                "password c_rolyn from 192.0.2.1",
            ]
            for key in perAddress { _ = try await store.admitAttempt(keys: [key], at: 100) { _ in .admitted } }
            try await store.clearFailures(keysStartingWith: "password c_rol from ")
            let left = Mutex<[String]>([])
            _ = try await store.admitAttempt(keys: perAddress, at: 100) { records in
                left.withLock { $0 = records.keys.sorted() }
                return .locked  // only looking
            }
            XCTAssertEqual(
                left.withLock { $0 },
                ["password c_rolyn from 192.0.2.1", "password carol from 192.0.2.1"],
                "\(kind): only that name's keys, '_' taken literally"
            )
        }
    }

    func testAPasskeyLoginCompletesOnceAndOnlyAtTheCounterItRead() async throws {
        try await forEachStore { kind, store in
            let (carol, key) = try await enrolled("carol", count: 3, in: store)
            // Bound before and after the key was last used (2): only the later one is announced.
            var older = credential(of: carol)
            var newer = credential(of: carol)
            var newest = credential(of: carol)
            (older.createdAt, newer.createdAt, newest.createdAt) = (1, 5, 7)
            for other in [newest, older, newer] {
                try await store.addCredential(other, event: event(carol, .deviceAdded))
            }
            let dave = account("dave")
            try await store.createAccount(dave)
            var elsewhere = credential(of: dave)
            elsewhere.createdAt = 6
            try await store.addCredential(elsewhere, event: event(dave, .deviceAdded))
            func completion(nonce: UInt8, expected: UInt32, new: UInt32, since: Double = 2) -> PasskeyLoginCompletion {
                PasskeyLoginCompletion(
                    challengeNonce: Data(repeating: nonce, count: 16),
                    challengeExpiresAt: 500,
                    credentialID: key.id,
                    expectedSignCount: expected,
                    newSignCount: new,
                    backedUp: true,
                    session: Session(
                        tokenHash: Data(repeating: nonce, count: 32),
                        accountID: carol.id,
                        createdAt: 100,
                        expiresAt: 200,
                        method: "passkey",
                        credentialID: key.id
                    ),
                    clearingFailures: "password carol",
                    event: event(carol, .passkeyLogin, at: Double(nonce) + 10),
                    announcingDevicesAddedSince: since
                )
            }
            func failures() async throws -> Int {
                let seen = Mutex(0)
                _ = try await store.admitAttempt(keys: ["password carol"], at: 50) { records in
                    seen.withLock { $0 = records["password carol"]?.failures ?? 0 }
                    return .locked  // only looking
                }
                return seen.withLock { $0 }
            }
            _ = try await store.admitAttempt(keys: ["password carol"], at: 50) { _ in .admitted }
            let stale0 = try await store.completePasskeyLogin(completion(nonce: 9, expected: 2, new: 4))
            XCTAssertEqual(stale0, .counterMoved, kind)
            let failuresKept = try await failures()
            let staleNonceUsed = try await store.isChallengeUsed(nonce: Data(repeating: 9, count: 16))
            XCTAssertEqual(failuresKept, 1, "\(kind): a login that did not complete lifts no lock")
            XCTAssertTrue(staleNonceUsed, "\(kind): its nonce is spent all the same")
            let first = try await store.completePasskeyLogin(completion(nonce: 1, expected: 3, new: 4))
            let failuresLeft = try await failures()
            XCTAssertEqual(failuresLeft, 0, "\(kind): the login lifted the password's failures")
            XCTAssertEqual(
                first,
                .completed(devicesAdded: [newer, newest]),
                "\(kind): the account's devices bound since, oldest first"
            )
            let replay = try await store.completePasskeyLogin(completion(nonce: 1, expected: 4, new: 5))
            XCTAssertEqual(replay, .challengeUsed, kind)
            let isUsed = try await store.isChallengeUsed(nonce: Data(repeating: 1, count: 16))
            XCTAssertTrue(isUsed, kind)
            let stale = try await store.completePasskeyLogin(completion(nonce: 2, expected: 3, new: 5))
            XCTAssertEqual(stale, .counterMoved, kind)
            let staleSession = try await store.session(tokenHash: Data(repeating: 2, count: 32))
            XCTAssertNil(staleSession, "\(kind): no session without the counter")
            let made = try await store.session(tokenHash: Data(repeating: 1, count: 32))
            XCTAssertEqual(made?.credentialID, key.id, kind)
            let nothingNew = try await store.completePasskeyLogin(completion(nonce: 3, expected: 4, new: 5, since: 7))
            XCTAssertEqual(nothingNew, .completed(devicesAdded: []), "\(kind): nothing bound since")
            let found = try await store.credentialAndAccount(id: key.id)
            XCTAssertEqual(found?.0.signCount, 5, kind)
            XCTAssertEqual(found?.0.aaguid, key.aaguid, kind)
            XCTAssertEqual(found?.0.transports, ["internal", "hybrid"], kind)
            XCTAssertEqual(
                found.map { [$0.0.backupEligible, $0.0.backedUp, $0.0.userVerifiedAtRegistration] },
                [true, true, true],
                "\(kind): BS set by the login"
            )
            XCTAssertEqual(found?.1, carol, kind)
            let events = try await store.events(accountID: carol.id, limit: 10)
            XCTAssertEqual(
                events.map(\.kind),
                [.passkeyLogin, .passkeyLogin] + Array(repeating: .deviceAdded, count: 4),
                "\(kind): only the completed logins are recorded, newest first"
            )
        }
    }

    /// Sessions, registration challenges, renames, revocations and password changes, as each store
    /// must do them.
    func testSessionsChallengesAndDevicesChangeAsTheContractSays() async throws {
        try await forEachStore { kind, store in
            let gina = account("gina")
            try await store.createAccount(gina)
            let phone = credential(of: gina)
            let laptop = credential(of: gina)
            for device in [phone, laptop] { try await store.addCredential(device, event: event(gina, .deviceAdded)) }
            func session(_ byte: UInt8, by credential: Data? = nil) -> Session {
                Session(
                    tokenHash: Data(repeating: byte, count: 32),
                    accountID: gina.id,
                    createdAt: 10,
                    expiresAt: 900,
                    method: credential == nil ? "password" : "passkey",
                    passwordVerifiedAt: credential == nil ? 10 : nil,
                    credentialID: credential
                )
            }
            for (byte, by) in [(UInt8(1), nil), (2, phone.id), (3, laptop.id), (4, nil)] as [(UInt8, Data?)] {
                try await store.createSession(
                    session(byte, by: by),
                    event: event(gina, by == nil ? .passwordLogin : .passkeyLogin)
                )
            }
            func live() async throws -> [UInt8] {
                var found: [UInt8] = []
                for byte in UInt8(1)...4
                where try await store.session(tokenHash: Data(repeating: byte, count: 32)) != nil { found.append(byte) }
                return found
            }
            let madeSession = try await store.session(tokenHash: Data(repeating: 2, count: 32))
            XCTAssertEqual(madeSession, session(2, by: phone.id), kind)

            try await store.markPasswordVerified(tokenHash: Data(repeating: 2, count: 32), at: 55)
            let stepped = try await store.session(tokenHash: Data(repeating: 2, count: 32))?.passwordVerifiedAt
            XCTAssertEqual(stepped, 55, kind)

            try await store.deleteSession(tokenHash: Data(repeating: 4, count: 32))
            let afterLogout = try await live()
            XCTAssertEqual(afterLogout, [1, 2, 3], "\(kind): a logout ends that session only")

            let challenge = Challenge(
                value: Data(repeating: 9, count: 32),
                purpose: .registration,
                accountID: gina.id,
                sessionTokenHash: Data(repeating: 1, count: 32),
                deviceName: "tablet",
                expiresAt: 600
            )
            try await store.storeChallenge(challenge)
            let taken = try await store.takeChallenge(challenge.value)
            let again = try await store.takeChallenge(challenge.value)
            XCTAssertEqual(taken, challenge, kind)
            XCTAssertNil(again, "\(kind): a challenge is taken once")

            let renamed = try await store.renameCredential(id: laptop.id, accountID: gina.id, name: "work laptop")
            let renamedByStranger = try await store.renameCredential(
                id: laptop.id,
                accountID: "someone else",
                name: "mine"
            )
            let names = try await store.credentials(accountID: gina.id).map(\.name)
            XCTAssertTrue(renamed, kind)
            XCTAssertFalse(renamedByStranger, "\(kind): only within its account")
            XCTAssertEqual(names, ["key", "work laptop"], kind)

            // Revoking the laptop from the phone's session ends the laptop's sessions, not the phone's.
            let revoked = try await store.deleteCredential(
                id: laptop.id,
                accountID: gina.id,
                event: event(gina, .deviceRevoked),
                keepingSession: Data(repeating: 2, count: 32)
            )
            let revokedAgain = try await store.deleteCredential(
                id: laptop.id,
                accountID: gina.id,
                event: event(gina, .deviceRevoked),
                keepingSession: nil
            )
            let afterRevoke = try await live()
            XCTAssertTrue(revoked, kind)
            XCTAssertFalse(revokedAgain, kind)
            XCTAssertEqual(afterRevoke, [1, 2], "\(kind): the sessions the revoked device signed in ended")

            try await store.changePassword(
                accountID: gina.id,
                hash: "scrypt$new",
                keepingSession: Data(repeating: 1, count: 32),
                verifiedAt: 77,
                clearingFailures: "password gina",
                event: event(gina, .passwordChanged, at: 5)
            )
            let afterChange = try await live()
            let hash = try await store.account(id: gina.id)?.passwordHash
            let kept = try await store.session(tokenHash: Data(repeating: 1, count: 32))?.passwordVerifiedAt
            XCTAssertEqual(afterChange, [1], "\(kind): every other session ends with a password change")
            XCTAssertEqual(hash, "scrypt$new", kind)
            XCTAssertEqual(kept, 77, kind)
            let events = try await store.events(accountID: gina.id, limit: 20).map(\.kind)
            XCTAssertEqual(events.filter { $0 == .deviceRevoked }.count, 1, "\(kind): one revocation recorded")
            XCTAssertEqual(events.filter { $0 == .passwordChanged }.count, 1, kind)
        }
    }

    /// Logins racing on one nonce, or on one counter: exactly one completes.
    func testRacingCompletionsCompleteOnce() async throws {
        try await forEachStore { kind, store in
            let (frank, key) = try await enrolled("frank", count: 4, in: store)
            func completion(nonce: UInt8, token: UInt8) -> PasskeyLoginCompletion {
                PasskeyLoginCompletion(
                    challengeNonce: Data(repeating: nonce, count: 16),
                    challengeExpiresAt: 500,
                    credentialID: key.id,
                    expectedSignCount: 4,
                    newSignCount: 5,
                    backedUp: false,
                    session: Session(
                        tokenHash: Data(repeating: token, count: 32),
                        accountID: frank.id,
                        createdAt: 100,
                        expiresAt: 200,
                        method: "passkey",
                        credentialID: key.id
                    ),
                    clearingFailures: "password frank",
                    event: event(frank, .passkeyLogin),
                    announcingDevicesAddedSince: 2
                )
            }
            func race(_ completions: [PasskeyLoginCompletion]) async throws -> [PasskeyLoginOutcome] {
                try await withThrowingTaskGroup(of: PasskeyLoginOutcome.self) { group in
                    for c in completions { group.addTask { try await store.completePasskeyLogin(c) } }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            let sameNonce = try await race((UInt8(1)...10).map { completion(nonce: 1, token: $0) })
            XCTAssertEqual(sameNonce.filter { $0 == .completed(devicesAdded: []) }.count, 1, "\(kind): \(sameNonce)")
            XCTAssertEqual(sameNonce.filter { $0 == .challengeUsed }.count, 9, "\(kind): \(sameNonce)")
            // The counter is 5 now: ten fresh nonces all expecting 4 → 5.
            let sameCounter = try await race((UInt8(11)...20).map { completion(nonce: $0, token: $0) })
            XCTAssertEqual(
                sameCounter,
                Array(repeating: .counterMoved, count: 10),
                "\(kind): the counter moved once already"
            )
            let fresh = try await race(
                (UInt8(21)...30).map { n in
                    var c = completion(nonce: n, token: n)
                    (c.expectedSignCount, c.newSignCount) = (5, 6)
                    return c
                }
            )
            XCTAssertEqual(fresh.filter { $0 == .completed(devicesAdded: []) }.count, 1, "\(kind): \(fresh)")
            XCTAssertEqual(fresh.filter { $0 == .counterMoved }.count, 9, "\(kind): \(fresh)")
            let events = try await store.events(accountID: frank.id, limit: 50)
            XCTAssertEqual(
                events.filter { $0.kind == .passkeyLogin }.count,
                2,
                "\(kind): one event per completed login"
            )
        }
    }

    /// A remade hash replaces only the hash it was made from.
    func testARehashReplacesOnlyTheHashItWasMadeFrom() async throws {
        try await forEachStore { kind, store in
            let erin = account("erin")
            try await store.createAccount(erin)
            let first = try await store.rehashPassword(accountID: erin.id, from: "scrypt$x", to: "scrypt$y")
            let stale = try await store.rehashPassword(accountID: erin.id, from: "scrypt$x", to: "scrypt$z")
            let stored = try await store.account(named: "erin")?.passwordHash
            XCTAssertTrue(first, kind)
            XCTAssertFalse(stale, "\(kind): the hash had changed")
            XCTAssertEqual(stored, "scrypt$y", kind)
        }
    }

    func testLookUpsByNameExpiryAndTheSecret() async throws {
        try await forEachStore { kind, store in
            let dave = account("dave")
            try await store.createAccount(dave)
            var attested = credential(of: dave)
            attested.attestedKey =
                "system daemon, fprintd, biometryCurrentSet,privateKeyUsage (akpu); root 0123456789abcdef"
            try await store.addCredential(attested, event: event(dave, .deviceAdded))
            let daves = try await store.credentials(accountID: dave.id)
            XCTAssertEqual(daves, [attested], "\(kind): every field comes back, the attestation's statement among them")
            let erin = account("erin")
            try await store.createAccount(erin)
            var second = credential(of: dave)
            second.createdAt = attested.createdAt + 1
            second.transports = []
            try await store.addCredential(second, event: event(dave, .deviceAdded))
            let listed = try await store.listing(username: "dave")
            XCTAssertEqual(
                listed,
                [
                    ListedCredential(
                        accountID: dave.id,
                        id: attested.id,
                        transports: attested.transports.joined(separator: ",")
                    ),
                    ListedCredential(accountID: dave.id, id: second.id, transports: ""),
                ],
                "\(kind): one row per credential, oldest first"
            )
            let erins = try await store.listing(username: "erin")
            XCTAssertEqual(
                erins,
                [ListedCredential(accountID: erin.id, id: nil, transports: nil)],
                "\(kind): an account without a credential: one stand-in row"
            )
            let nobodys = try await store.listing(username: "nobody")
            XCTAssertEqual(
                nobodys,
                [ListedCredential(accountID: nil, id: nil, transports: nil)],
                "\(kind): an unknown name: one stand-in row"
            )
            let standIn = Account(
                id: "",
                username: "nobody",
                passwordHash: "scrypt$stand-in",
                userHandle: Data(count: 32),
                createdAt: 0
            )
            let found = try await store.account(named: "dave", standIn: standIn)
            XCTAssertEqual(found, dave, "\(kind): the named account, every field")
            let stoodIn = try await store.account(named: "nobody", standIn: standIn)
            XCTAssertEqual(stoodIn, standIn, "\(kind): no such name: the stand-in, through the same columns")

            try await store.createSession(
                Session(
                    tokenHash: Data([9]),
                    accountID: dave.id,
                    createdAt: 0,
                    expiresAt: 50,
                    method: "password",
                    passwordVerifiedAt: 0
                ),
                event: event(dave, .passwordLogin, at: 30)
            )
            try await store.markPasswordVerified(tokenHash: Data([9]), at: 40)
            let verified = try await store.session(tokenHash: Data([9]))
            XCTAssertEqual(verified?.passwordVerifiedAt, 40, kind)
            for (key, failures) in [("idle", 3), ("locked", 100)] {
                for _ in 0..<failures { _ = try await store.admitAttempt(keys: [key], at: 10) { _ in .admitted } }
            }
            try await store.removeExpired(now: 60, failuresIdleSince: 20, lockAt: 100, eventsBefore: 20)
            let events = try await store.events(accountID: dave.id, limit: 10)
            XCTAssertEqual(events.map(\.kind), [.passwordLogin], "\(kind): the old event is gone, the newer kept")
            let expired = try await store.session(tokenHash: Data([9]))
            XCTAssertNil(expired, kind)
            let left = try await store.admitAttempt(keys: ["idle", "locked"], at: 60) { records in
                records["idle"] == nil && records["locked"]?.failures == 100 ? .locked : .admitted
            }
            XCTAssertEqual(left, .locked, "\(kind): the idle record is gone, the lock is kept")

            let secret = try await store.secret()
            let again = try await store.secret()
            XCTAssertEqual(secret.count, 32, kind)
            XCTAssertEqual(secret, again, "\(kind): one secret per deployment")
        }
    }
}
