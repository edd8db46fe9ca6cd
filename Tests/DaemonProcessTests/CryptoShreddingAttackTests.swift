import EnclaveClient
import EnclaveProtocol
import Foundation
import GRDB
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

/// Deleted means gone: someone who copies the state directory after a deletion — with its WAL, and
/// even with the master key file beside it — finds nothing of what was deleted. The attack is a
/// forensic one: the sealed bytes of the item (read from the live database before the deletion, as
/// an oracle of what to look for) are searched for in every file of the copied directory; where they
/// survive, the key file opens them.
final class CryptoShreddingAttackTests: XCTestCase {
    private struct SealedRow {
        var wrappedKey: Data
        var ciphertext: Data
    }

    /// The sealed columns of the item with `account`, read the way a copy of the database is read.
    private func sealedRow(_ enclave: TestEnclave, account: String) throws -> SealedRow {
        var configuration = Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite", configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in
            let row = try XCTUnwrap(
                Row.fetchOne(db, sql: "SELECT wrappedKey, ciphertext FROM item WHERE account = ?", arguments: [account])
            )
            return SealedRow(wrappedKey: row["wrappedKey"], ciphertext: row["ciphertext"])
        }
    }

    /// The wrapped key of a class of the user's items (nil: that class has none).
    private func wrappedClassKey(_ enclave: TestEnclave, _ keyClass: String) throws -> Data? {
        var configuration = Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite", configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in
            try Data.fetchOne(db, sql: "SELECT wrapped FROM class_key WHERE class = ?", arguments: [keyClass])
        }
    }

    /// The files of a copy of the state directory, taken now, in which `bytes` occur.
    private func filesHolding(_ bytes: [Data], in enclave: TestEnclave) throws -> [String] {
        let copy = enclave.directory + "/copy-\(UUID().uuidString)"
        try FileManager.default.copyItem(atPath: enclave.stateDirectory, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        var found: [String] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: copy) {
            let contents = try Data(contentsOf: URL(fileURLWithPath: copy + "/" + name))
            for needle in bytes where contents.range(of: needle) != nil { found.append(name) }
        }
        return found
    }

    private func add(
        _ enclave: TestEnclave,
        account: String,
        secret: String,
        protection: Protection = .whenUnlocked
    ) throws {
        let request = KeychainRequest(
            attributes: [
                "class": .string("genp"), "svce": .string("shred"), "acct": .string(account),
                "v_Data": .data(Data(secret.utf8)),
            ],
            accessControl: AccessControlValue(protection: protection, flags: []),
            context: "shred"
        )
        guard case .keychain(let reply) = try enclave.send(.keychainAdd(request)), reply.status == .success else {
            return XCTFail("the item was not added")
        }
    }

    func testADeletedItemLeavesNothingInTheStateDirectoryOrItsWAL() throws {
        let enclave = try TestEnclave()
        // Neighbours written before and after, so the deleted row shares its pages with live ones.
        try add(enclave, account: "before", secret: "neighbour-before")
        try add(enclave, account: "victim", secret: "the-deleted-secret-4f1c")
        try add(enclave, account: "after", secret: "neighbour-after")
        let sealed = try sealedRow(enclave, account: "victim")
        XCTAssertFalse(try filesHolding([sealed.ciphertext], in: enclave).isEmpty, "the oracle finds the live item")

        let delete = KeychainRequest(
            attributes: ["class": .string("genp"), "svce": .string("shred"), "acct": .string("victim")],
            context: "shred"
        )
        guard case .keychain(let reply) = try enclave.send(.keychainDelete(delete)), reply.status == .success else {
            return XCTFail("not deleted")
        }

        // As soon as the answer has come: while the daemon runs, and after it stops.
        XCTAssertEqual(
            try filesHolding([sealed.wrappedKey, sealed.ciphertext], in: enclave),
            [],
            "the deleted item's sealed key or secret is still in the state directory (with the key file, it opens)"
        )
        enclave.stop()
        XCTAssertEqual(try filesHolding([sealed.wrappedKey, sealed.ciphertext], in: enclave), [])
    }

    func testRemovingThePasscodeDestroysTheKeyOfItsClassAndEveryItemOfIt() throws {
        let enclave = try TestEnclave()
        try add(enclave, account: "kept", secret: "survives-passcode-removal", protection: .whenUnlocked)
        try add(
            enclave,
            account: "bound",
            secret: "dies-with-the-passcode-77a2",
            protection: .whenPasscodeSetThisDeviceOnly
        )
        let sealed = try sealedRow(enclave, account: "bound")
        let classKey = try XCTUnwrap(try wrappedClassKey(enclave, "passcodeSet"), "the class has a key of its own")

        try enclave.removePasscode(current: "1234")

        XCTAssertEqual(
            try filesHolding([sealed.wrappedKey, sealed.ciphertext, classKey], in: enclave),
            [],
            "after the passcode's removal its class key or an item of it is still in the state directory"
        )
        XCTAssertNil(try wrappedClassKey(enclave, "passcodeSet"))
        // The other class is untouched, and a new passcode starts a new class key.
        let copy = KeychainRequest(
            attributes: ["class": .string("genp"), "svce": .string("shred"), "acct": .string("kept")],
            context: "shred",
            returnData: true
        )
        guard case .keychain(let kept) = try enclave.send(.keychainCopy(copy)) else { return XCTFail() }
        XCTAssertEqual(kept.items.first?.data, Data("survives-passcode-removal".utf8))
        try enclave.setPasscode("5678")
        try add(enclave, account: "again", secret: "a-new-class-key", protection: .whenPasscodeSetThisDeviceOnly)
        XCTAssertNotEqual(try wrappedClassKey(enclave, "passcodeSet"), classKey)
    }
}
