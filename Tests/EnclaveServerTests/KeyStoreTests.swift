import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
import XCTest

@testable import EnclaveServer

/// Class keys and Secure Enclave key records in the database: made once, destroyed with what
/// holds them, bounded per user.
final class KeyStoreTests: XCTestCase {
    private var directory: String!
    private let wrapping = SymmetricKey(size: .bits256)

    override func setUp() {
        directory = NSTemporaryDirectory() + "keystore-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func record(uid: UInt32 = 1000, _ keyClass: KeyClass = .standard, app: String = "/usr/bin/app") -> KeyRecord
    {
        KeyRecord(
            handle: .random(),
            uid: uid,
            app: app,
            keyClass: keyClass,
            wrapped: Data([1, 2, 3]),
            created: Date(timeIntervalSince1970: 1_700_000_000)
        )
    }

    private func item(
        _ account: String,
        protection: Protection = .whenUnlocked,
        holding key: KeyHandle? = nil
    ) -> StoredItem {
        StoredItem(
            uid: 1000,
            accessGroup: "/usr/bin/app",
            itemClass: "genp",
            attributes: ["acct": .string(account)],
            protection: protection,
            flags: [],
            enrolmentGeneration: 0,
            sealed: ItemSealing.Sealed(wrappedKey: Data([1]), ciphertext: Data([2]), passwordSalt: nil),
            persistentRef: Data(account.utf8),
            created: Date(),
            modified: Date(),
            heldKey: key
        )
    }

    func testAClassKeyIsMadeOnceAndOpensOnlyWithItsWrappingKey() throws {
        let storage = try Storage(directory: directory)
        let first = try storage.classKey(uid: 1000, .standard, wrappingKey: wrapping)
        XCTAssertEqual(try storage.classKey(uid: 1000, .standard, wrappingKey: wrapping), first)
        XCTAssertNotEqual(
            try storage.classKey(uid: 1000, .passcodeSet, wrappingKey: wrapping),
            first,
            "one key per class"
        )
        XCTAssertNotEqual(try storage.classKey(uid: 1001, .standard, wrappingKey: wrapping), first, "one key per user")
        XCTAssertThrowsError(
            try storage.classKey(uid: 1000, .standard, wrappingKey: SymmetricKey(size: .bits256)),
            "another master key"
        )
    }

    func testDeletingAnItemDeletesTheKeyItHoldsAndRevokesAnOldBlobIt() async throws {
        let storage = try Storage(directory: directory)
        let held = record()
        let kept = record()
        try storage.insertKeyRecord(held)
        try storage.insertKeyRecord(kept)
        let legacy = KeyHandle(Data(repeating: 5, count: 32))
        let a = try await storage.insertItem(item("a", holding: held.handle))
        let b = try await storage.insertItem(item("b", holding: legacy))
        XCTAssertEqual(try storage.keyRecord(held.handle), held)
        try storage.deleteItems(ids: [a, b], uid: 1000)
        XCTAssertNil(try storage.keyRecord(held.handle))
        XCTAssertEqual(try storage.keyRecord(kept.handle), kept, "a key no deleted item held stays")
        XCTAssertTrue(try storage.isRevoked(legacy))
        XCTAssertFalse(try storage.isRevoked(KeyHandle(Data(repeating: 6, count: 32))))
    }

    func testRemovingThePasscodeDestroysItsClassKeyItemsAndKeysWithTheRecordInOneTransaction() async throws {
        let storage = try Storage(directory: directory)
        let standard = try storage.classKey(uid: 1000, .standard, wrappingKey: wrapping)
        let passcodeSet = try storage.classKey(uid: 1000, .passcodeSet, wrappingKey: wrapping)
        _ = try storage.classKey(uid: 1001, .passcodeSet, wrappingKey: wrapping)
        let bound = record(.passcodeSet)
        let other = record(.standard)
        let otherUser = record(uid: 1001, .passcodeSet)
        for r in [bound, other, otherUser] { try storage.insertKeyRecord(r) }
        _ = try await storage.insertItem(item("kept"))
        _ = try await storage.insertItem(item("gone", protection: .whenPasscodeSetThisDeviceOnly))
        var user = UserRecord(uid: 1000, domainSecret: Data(count: 32))
        user.passcodeEpoch = 7

        let removed = try storage.transaction { db in
            let removed = try Storage.removePasscodeClass(uid: user.uid, db)
            try Storage.write(user, audit: [], db)
            return removed
        }
        XCTAssertEqual(removed, 1)

        XCTAssertEqual(try storage.loadUser(1000)?.passcodeEpoch, 7, "the record was saved with it")
        XCTAssertEqual(try storage.allItems(uid: 1000).map { KeychainRules.string($0.attributes, "acct") }, ["kept"])
        XCTAssertEqual(
            try storage.keyRecord(bound.handle)?.isDestroyed,
            true,
            "its own key is gone; the record says so"
        )
        XCTAssertEqual(try storage.keyRecord(other.handle), other)
        XCTAssertEqual(try storage.keyRecord(otherUser.handle), otherUser, "another user's class is not touched")
        XCTAssertEqual(try storage.classKey(uid: 1000, .standard, wrappingKey: wrapping), standard)
        XCTAssertNotEqual(
            try storage.classKey(uid: 1000, .passcodeSet, wrappingKey: wrapping),
            passcodeSet,
            "a new one is made"
        )
    }

    func testKeysAreBoundedPerUserAndPerApp() throws {
        let storage = try Storage(directory: directory, quota: KeychainQuota(items: 8, bytes: 1 << 20))
        for _ in 0..<2 { try storage.insertKeyRecord(record()) }
        XCTAssertThrowsError(try storage.insertKeyRecord(record()), "one app holds a quarter at most") {
            XCTAssertTrue("\($0)".contains("this app has 2"), "\($0)")
        }
        for app in ["/usr/bin/b", "/usr/bin/c", "/usr/bin/d"] {
            for _ in 0..<2 { try storage.insertKeyRecord(record(app: app)) }
        }
        XCTAssertThrowsError(try storage.insertKeyRecord(record(app: "/usr/bin/e"))) {
            XCTAssertTrue("\($0)".contains("8 Secure Enclave keys"), "\($0)")
        }
        XCTAssertNoThrow(try storage.insertKeyRecord(record(uid: 1001)), "another user's quota is its own")
        // Keys destroyed with the passcode no longer count.
        let bounded = try Storage(directory: directory + "-2", quota: KeychainQuota(items: 8, bytes: 1 << 20))
        defer { try? FileManager.default.removeItem(atPath: directory + "-2") }
        for _ in 0..<2 { try bounded.insertKeyRecord(record(.passcodeSet)) }
        XCTAssertThrowsError(try bounded.insertKeyRecord(record()))
        _ = try bounded.transaction { db in try Storage.removePasscodeClass(uid: 1000, db) }
        XCTAssertNoThrow(try bounded.insertKeyRecord(record()))
    }
}
