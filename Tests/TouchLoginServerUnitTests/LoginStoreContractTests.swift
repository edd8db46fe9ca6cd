import Foundation
import Logging
import PostgresNIO
@testable import TouchLoginServer
import XCTest

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

        guard let admin = ProcessInfo.processInfo.environment["TOUCHLOGIN_TEST_POSTGRES"], !admin.isEmpty else { return }
        let name = "touchlogin_contract_\(UInt32.random(in: 0...UInt32.max))"
        let logger = Logger(label: "contract")
        let adminClient = try PostgresLoginStore.client(url: admin)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await adminClient.run() }
            try await adminClient.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
            do {
                let client = try PostgresLoginStore.client(url: admin.replacingOccurrences(of: "/postgres", with: "/\(name)"))
                try await withThrowingTaskGroup(of: Void.self) { inner in
                    inner.addTask { await client.run() }
                    let store = PostgresLoginStore(client: client, logger: logger)
                    try await store.migrate()
                    defer { inner.cancelAll() }
                    try await body("postgresql", store)
                }
            } catch {
                _ = try? await adminClient.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"), logger: logger)
                group.cancelAll()
                throw error
            }
            try await adminClient.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"), logger: logger)
            group.cancelAll()
        }
    }

    func account(_ name: String) -> Account {
        Account(id: UUID().uuidString, username: name, passwordHash: "scrypt$x", userHandle: Data(UUID().uuidString.utf8), createdAt: 1)
    }

    func event(_ account: Account, _ kind: AccountEvent.Kind, at: Double = 1) -> AccountEvent {
        AccountEvent(accountID: account.id, at: at, kind: kind, address: "192.0.2.1")
    }

    func credential(of account: Account, count: UInt32 = 0) -> Credential {
        var credential = Credential(id: Data(UUID().uuidString.utf8), accountID: account.id, publicKey: Data([1, 2, 3]), signCount: count, name: "key",
                                    attestationFormat: "none", createdAt: 2, lastUsedAt: nil, aaguid: Data(repeating: 0xab, count: 16), transports: ["internal", "hybrid"])
        credential.backupEligible = true
        credential.userVerifiedAtRegistration = true
        return credential
    }

    func testParallelAttemptsAreCountedBeforeTheyAreChecked() async throws {
        try await forEachStore { kind, store in
            let schedule = FailureSchedule(freeFailures: 5, firstDelay: 1000, maxDelay: 1000)
            let keys = ["password carol", "password carol from 192.0.2.1"]
            let admitted = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        try await store.admitAttempt(keys: keys, at: 100) { records in schedule.decide(records[keys[0]], at: 100) } == .admitted
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            XCTAssertEqual(admitted, 5, "\(kind): twenty at once, and only the free five got through")
            try await store.clearFailures(keys: keys)
            let again = try await store.admitAttempt(keys: keys, at: 100) { records in records.isEmpty ? .admitted : .locked }
            XCTAssertEqual(again, .admitted, "\(kind): a success clears the count")
        }
    }

    func testAPasskeyLoginCompletesOnceAndOnlyAtTheCounterItRead() async throws {
        try await forEachStore { kind, store in
            let carol = account("carol")
            try await store.createAccount(carol)
            let key = credential(of: carol, count: 3)
            try await store.addCredential(key, event: event(carol, .deviceAdded))
            // Bound before and after the key was last used (2): only the later one is announced.
            var older = credential(of: carol), newer = credential(of: carol), newest = credential(of: carol)
            (older.createdAt, newer.createdAt, newest.createdAt) = (1, 5, 7)
            for other in [newest, older, newer] { try await store.addCredential(other, event: event(carol, .deviceAdded)) }
            let dave = account("dave")
            try await store.createAccount(dave)
            var elsewhere = credential(of: dave)
            elsewhere.createdAt = 6
            try await store.addCredential(elsewhere, event: event(dave, .deviceAdded))
            func completion(nonce: UInt8, expected: UInt32, new: UInt32) -> PasskeyLoginCompletion {
                PasskeyLoginCompletion(challengeNonce: Data(repeating: nonce, count: 16), challengeExpiresAt: 500, credentialID: key.id,
                                       expectedSignCount: expected, newSignCount: new, backedUp: true,
                                       session: Session(tokenHash: Data(repeating: nonce, count: 32), accountID: carol.id, createdAt: 100, expiresAt: 200,
                                                        method: "passkey", credentialID: key.id),
                                       clearingFailures: "password carol", event: event(carol, .passkeyLogin, at: Double(nonce) + 10),
                                       announcingDevicesAddedSince: 2)
            }
            let first = try await store.completePasskeyLogin(completion(nonce: 1, expected: 3, new: 4))
            XCTAssertEqual(first, .completed(devicesAdded: [newer, newest]), "\(kind): the account's devices bound since, oldest first")
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
            let found = try await store.credentialAndAccount(id: key.id)
            XCTAssertEqual(found?.0.signCount, 4, kind)
            XCTAssertEqual(found?.0.aaguid, key.aaguid, kind)
            XCTAssertEqual(found?.0.transports, ["internal", "hybrid"], kind)
            XCTAssertEqual(found.map { [$0.0.backupEligible, $0.0.backedUp, $0.0.userVerifiedAtRegistration] }, [true, true, true], "\(kind): BS set by the login")
            XCTAssertEqual(found?.1, carol, kind)
            let events = try await store.events(accountID: carol.id, limit: 10)
            XCTAssertEqual(events.map(\.kind), [.passkeyLogin] + Array(repeating: .deviceAdded, count: 4), "\(kind): only the completed login is recorded, newest first")
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
            attested.attestedKey = "system daemon, fprintd, biometryCurrentSet,privateKeyUsage (akpu); root 0123456789abcdef"
            try await store.addCredential(attested, event: event(dave, .deviceAdded))
            let daves = try await store.credentials(username: "dave")
            let nobodys = try await store.credentials(username: "nobody")
            XCTAssertEqual(daves, [attested], "\(kind): every field comes back, the attestation's statement among them")
            XCTAssertEqual(nobodys.count, 0, kind)

            try await store.createSession(Session(tokenHash: Data([9]), accountID: dave.id, createdAt: 0, expiresAt: 50, method: "password", passwordVerifiedAt: 0),
                                          event: event(dave, .passwordLogin, at: 30))
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
            let left = try await store.admitAttempt(keys: ["idle", "locked"], at: 60) { records in records["idle"] == nil && records["locked"]?.failures == 100 ? .locked : .admitted }
            XCTAssertEqual(left, .locked, "\(kind): the idle record is gone, the lock is kept")

            let secret = try await store.secret()
            let again = try await store.secret()
            XCTAssertEqual(secret.count, 32, kind)
            XCTAssertEqual(secret, again, "\(kind): one secret per deployment")
        }
    }
}
