import Crypto
import EnclaveClient
import EnclaveProtocol
import Foundation
import GRDB
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

/// An existing install moves to class keys and key records in place: the new daemon starts on a
/// state directory written in the old format (`LegacyState`), every item and key of it still
/// works, the old wraps are gone from the files, and deleting an old key's item now revokes the
/// old blob too.
final class StateUpgradeTests: XCTestCase {
    func testTheDaemonUpgradesStateWrittenInTheOldFormat() async throws {
        var configuration = TestEnclave.Configuration()
        configuration.passcode = nil
        let enclave = try TestEnclave(configuration)
        let app = try enclave.connection().hello.app
        enclave.stop()
        let master = SymmetricKey(
            data: try Data(contentsOf: URL(fileURLWithPath: enclave.directory + "/keys/master.key"))
        )
        try FileManager.default.removeItem(atPath: enclave.stateDirectory)

        let legacy = try LegacyState(directory: enclave.stateDirectory, master: master, uid: getuid(), app: app)
        try legacy.setUser(passcode: "1234")
        var oldWraps: [Data] = []
        oldWraps.append(
            try legacy.addItem(
                class: "genp",
                primaryKey: "acct=s:alice\u{1F}svce=s:mail\u{1F}sync=",
                attributes: ["svce": .string("mail"), "acct": .string("alice")],
                secret: Data("old secret".utf8),
                protection: .whenUnlocked
            )
        )
        oldWraps.append(
            try legacy.addItem(
                class: "genp",
                primaryKey: "acct=s:bob\u{1F}svce=s:mail\u{1F}sync=",
                attributes: ["svce": .string("mail"), "acct": .string("bob")],
                secret: Data("passcode-bound".utf8),
                protection: .whenPasscodeSetThisDeviceOnly
            )
        )
        // Said "not synchronizable" aloud: its primary key was apart from an unsaid one's.
        oldWraps.append(
            try legacy.addItem(
                class: "genp",
                primaryKey: "acct=s:carol\u{1F}svce=s:mail\u{1F}sync=b:0",
                attributes: ["svce": .string("mail"), "acct": .string("carol"), "sync": .bool(false)],
                secret: Data("carol's".utf8),
                protection: .whenUnlocked
            )
        )
        // A Secure Enclave key item (SecKeyCreateRandomKey with kSecAttrIsPermanent), a right, and
        // a key the app kept only as its data representation.
        let itemKey = P256.Signing.PrivateKey()
        let itemBlob = try legacy.keyBlob(itemKey, kind: .general, flags: [.privateKeyUsage])
        let label = Data(Insecure.SHA1.hash(data: itemKey.publicKey.x963Representation))
        oldWraps.append(
            try legacy.addItem(
                class: "keys",
                primaryKey:
                    "kcls=s:1\u{1F}klbl=d:\(label.base64EncodedString())\u{1F}atag=d:\(Data("old-key".utf8).base64EncodedString())\u{1F}type=s:73\u{1F}bsiz=i:256\u{1F}sync=",
                attributes: [
                    "kcls": .string("1"), "klbl": .data(label), "atag": .data(Data("old-key".utf8)),
                    "type": .string("73"), "bsiz": .int(256), "tkid": .string(KeyHoldingItems.secureEnclaveToken),
                ],
                secret: itemKey.publicKey.x963Representation + itemBlob,
                protection: .whenUnlockedThisDeviceOnly,
                flags: [.privateKeyUsage]
            )
        )
        let rightKey = P256.Signing.PrivateKey()
        let rightBlob = try legacy.keyBlob(rightKey, kind: .general, flags: [.userPresence, .privateKeyUsage])
        let record = try JSONSerialization.data(withJSONObject: [
            "requirement": "default", "keyBlob": rightBlob.base64EncodedString(),
            "publicKey": rightKey.publicKey.x963Representation.base64EncodedString(),
            "hasSecret": true, "keyKind": "general",
        ])
        oldWraps.append(
            try legacy.addItem(
                class: "genp",
                primaryKey: "acct=s:door\u{1F}svce=s:\(KeyHoldingItems.rightStoreService)\u{1F}sync=",
                attributes: [
                    "svce": .string(KeyHoldingItems.rightStoreService), "acct": .string("door"), "gena": .data(record),
                ],
                secret: Data("behind the door".utf8),
                protection: .whenUnlockedThisDeviceOnly,
                flags: [.userPresence]
            )
        )
        let keptBlob = try legacy.keyBlob(P256.Signing.PrivateKey(), kind: .signing, flags: [.privateKeyUsage])
        // Deleted by the old daemon: its sealed key stays in a free page of the old database.
        let deletedBefore = try legacy.addItem(
            class: "genp",
            primaryKey: "acct=s:gone\u{1F}svce=s:mail\u{1F}sync=",
            attributes: ["svce": .string("mail"), "acct": .string("gone")],
            secret: Data("deleted long ago".utf8),
            protection: .whenUnlocked
        )
        try legacy.deleteItem(account: "gone")
        oldWraps.append(deletedBefore)

        try enclave.start()

        // Nothing of the old wraps is left in the files; every item is under its class key.
        for name in try FileManager.default.contentsOfDirectory(atPath: enclave.stateDirectory) {
            let contents = try Data(contentsOf: URL(fileURLWithPath: enclave.stateDirectory + "/" + name))
            for wrap in oldWraps { XCTAssertNil(contents.range(of: wrap), "an old wrap is still in \(name)") }
        }
        var readOnly = Configuration()
        readOnly.readonly = true
        let database = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite", configuration: readOnly)
        let stillOld = try await database.read {
            try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM item WHERE sealVersion = 1")
        }
        let holding = try await database.read {
            try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM item WHERE heldKey IS NOT NULL")
        }
        XCTAssertEqual(stillOld, 0)
        XCTAssertEqual(holding, 2, "the key item and the right hold their keys")
        try database.close()

        // The old passcode, items and keys work.
        XCTAssertTrue(try enclave.status().passcodeSet)
        for (account, secret) in [("alice", "old secret"), ("bob", "passcode-bound")] {
            let copy = KeychainRequest(
                attributes: ["class": .string("genp"), "svce": .string("mail"), "acct": .string(account)],
                context: "u",
                returnData: true
            )
            guard case .keychain(let reply) = try enclave.send(.keychainCopy(copy)) else { return XCTFail() }
            XCTAssertEqual(reply.items.first?.data, Data(secret.utf8), account)
        }
        let duplicate = KeychainRequest(
            attributes: [
                "class": .string("genp"), "svce": .string("mail"), "acct": .string("carol"),
                "v_Data": .data(Data("again".utf8)),
            ],
            context: "u"
        )
        guard case .keychain(let again) = try enclave.send(.keychainAdd(duplicate)) else { return XCTFail() }
        XCTAssertEqual(
            again.status,
            .duplicateItem,
            "an old item said not synchronizable is the same item as one that does not say it"
        )
        func sign(_ blob: Data, kind: KeyRequest.Kind = .signing) throws -> KeyReply {
            guard
                case .key(let reply) = try enclave.send(
                    .key(KeyRequest(operation: .sign, kind: kind, blob: blob, message: Data("m".utf8), context: "u"))
                )
            else { throw XCTSkip("no key reply") }
            return reply
        }
        XCTAssertNil(try sign(keptBlob).problem, "a kept old blob still signs")

        try await enclave.run {
            var found: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("old-key".utf8),
                kSecReturnRef as String: true,
            ]
            XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &found), errSecSuccess)
            let key = try XCTUnwrap(found as! SecKey?)
            var error: Unmanaged<CFError>?
            XCTAssertNotNil(
                SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, &error),
                "\(error as Any)"
            )

            let right = try await LARightStore.shared.right(forIdentifier: "door")
            try enclave.queue(.passcode("1234"))
            try await right.authorize(localizedReason: "Open the old door")
            let secret = try await right.secret.rawData
            XCTAssertEqual(secret, Data("behind the door".utf8))
            _ = try await right.key.sign(Data("m".utf8), algorithm: .ecdsaSignatureMessageX962SHA256)

            // Deleting their items now revokes the old blobs too.
            XCTAssertEqual(
                SecItemDelete([kSecClass: kSecClassKey, kSecAttrApplicationTag: Data("old-key".utf8)] as CFDictionary),
                errSecSuccess
            )
            XCTAssertNil(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data("m".utf8) as CFData, &error))
            try await LARightStore.shared.removeRight(forIdentifier: "door")
            do {
                _ = try await right.key.sign(Data("m".utf8), algorithm: .ecdsaSignatureMessageX962SHA256)
                XCTFail("the removed right's old key still signed")
            } catch {
                XCTAssertTrue("\(error)".contains("deleted"), "\(error)")
            }
        }
        XCTAssertEqual(try sign(itemBlob, kind: .general).problem, .invalidKey)
        XCTAssertEqual(try sign(rightBlob, kind: .general).problem, .invalidKey)
        XCTAssertNil(try sign(keptBlob).problem)

        // A restart upgrades nothing twice and keeps it all.
        try enclave.restart()
        XCTAssertNil(try sign(keptBlob).problem)
        XCTAssertEqual(try sign(itemBlob, kind: .general).problem, .invalidKey)
    }
}
