import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

@testable import EnclaveServer

/// An install made with the software root moves to the TPM root (swtpm here) in place (issue 31,
/// item 7): with root's one-shot on a state in the old format, and at start with `move-to-tpm =
/// yes` on one the daemon wrote today. Every item, key, right, passcode, counter and the
/// attestation root are kept; afterwards the state and key file copied elsewhere open nothing,
/// the key file tests no passcode guess, and no old wrap is left in the files.
final class SoftwareRootMoveTests: XCTestCase {
    private var tpms: [SwtpmSimulator] = []
    private var enclaves: [TestEnclave] = []

    override func setUpWithError() throws {
        guard SwtpmSimulator.available else { throw XCTSkip("needs swtpm (scripts/setup-debian installs it)") }
    }

    override func tearDown() {
        for enclave in enclaves { enclave.stop() }
        enclaves = []
        for tpm in tpms { tpm.destroy() }
        tpms = []
    }

    private func simulator() throws -> SwtpmSimulator {
        let tpm = try SwtpmSimulator()
        tpms.append(tpm)
        return tpm
    }

    private func enclave(tpm: String, passcode: String? = "1234") throws -> TestEnclave {
        var configuration = TestEnclave.Configuration()
        configuration.tpm = tpm
        configuration.passcode = passcode
        let enclave = try TestEnclave(configuration)
        enclaves.append(enclave)
        return enclave
    }

    private func keyFile(of enclave: TestEnclave) throws -> SymmetricKey {
        SymmetricKey(data: try Data(contentsOf: URL(fileURLWithPath: enclave.directory + "/keys/master.key")))
    }

    private func root(of enclave: TestEnclave) throws -> String? {
        let out = try runProcess(productPath("lactl"), ["status", "--json", "--socket", enclave.socketPath])
        let json = try JSONSerialization.jsonObject(with: Data(out.stdout.utf8)) as? [String: Any]
        return json?["root"] as? String
    }

    private func storedVerifier(_ enclave: TestEnclave) throws -> PasscodeVerifier {
        var readOnly = Configuration()
        readOnly.readonly = true
        let queue = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite", configuration: readOnly)
        defer { try? queue.close() }
        let json = try queue.read { db in try Data.fetchOne(db, sql: "SELECT passcode FROM user") }
        return try JSONDecoder().decode(PasscodeVerifier.self, from: try XCTUnwrap(json))
    }

    private func wrappedClassKeys(_ enclave: TestEnclave) throws -> [Data] {
        let queue = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite")
        defer { try? queue.close() }
        return try queue.read { db in try Data.fetchAll(db, sql: "SELECT wrapped FROM class_key") }
    }

    private func assertNoneIn(
        _ directory: String,
        of values: [Data],
        file: StaticString = #filePath,
        line: UInt = #line
    )
        throws
    {
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            let contents = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
            for value in values {
                XCTAssertNil(contents.range(of: value), "an old wrap is still in \(name)", file: file, line: line)
            }
        }
    }

    private func read(_ account: String, on enclave: TestEnclave) throws -> Data? {
        let copy = KeychainRequest(
            attributes: ["class": .string("genp"), "svce": .string("mail"), "acct": .string(account)],
            context: "u",
            returnData: true
        )
        guard case .keychain(let reply) = try enclave.send(.keychainCopy(copy)) else { return nil }
        return reply.items.first?.data
    }

    /// Root's one-shot on a state the daemon wrote before class keys: the move upgrades and
    /// moves it, shows the recovery secret once, and the secret recovers the moved state after a
    /// TPM clear.
    func testTheOneShotMovesAStateInTheOldFormatAndIssuesItsRecoverySecret() throws {
        let tpm = try simulator()
        let enclave = try enclave(tpm: tpm.tcti, passcode: nil)
        let app = try enclave.connection().hello.app
        enclave.stop()
        let master = try keyFile(of: enclave)
        try FileManager.default.removeItem(atPath: enclave.stateDirectory)
        let legacy = try LegacyState(directory: enclave.stateDirectory, master: master, uid: getuid(), app: app)
        try legacy.setUser(passcode: "1234")
        let oldWraps = [
            try legacy.addItem(
                class: "genp",
                primaryKey: "acct=s:alice\u{1F}svce=s:mail\u{1F}sync=",
                attributes: ["svce": .string("mail"), "acct": .string("alice")],
                secret: Data("old secret".utf8),
                protection: .whenUnlocked
            ),
            try legacy.addItem(
                class: "genp",
                primaryKey: "acct=s:bob\u{1F}svce=s:mail\u{1F}sync=",
                attributes: ["svce": .string("mail"), "acct": .string("bob")],
                secret: Data("passcode-bound".utf8),
                protection: .whenPasscodeSetThisDeviceOnly
            ),
        ]
        let keptKey = P256.Signing.PrivateKey()
        let keptBlob = try legacy.keyBlob(keptKey, kind: .signing, flags: [.privateKeyUsage])
        try legacy.queue.close()

        // A wrong key file (a mistyped path makes a new one): refused before anything changes.
        let keyPath = enclave.directory + "/keys/master.key"
        let rightKey = try Data(contentsOf: URL(fileURLWithPath: keyPath))
        try SymmetricKey(size: .bits256).withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: keyPath)) }
        let wrong = try enclave.runOnce(tpm: tpm, ["--move-to-tpm"])
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.stderr.contains("does not belong to the state"), wrong.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: keyPath + ".moved-to-tpm"))
        try rightKey.write(to: URL(fileURLWithPath: keyPath))

        // Without a TPM named, a software state started on a TPM is refused, naming the move.
        XCTAssertThrowsError(try enclave.start(), "a software-root state moved without being asked")
        XCTAssertTrue(enclave.log().contains("laenclaved --move-to-tpm"), enclave.log())

        let moved = try enclave.runOnce(tpm: tpm, ["--move-to-tpm"])
        XCTAssertEqual(moved.status, 0, moved.stderr)
        let secret = moved.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(secret.count, 79, "the recovery secret, shown once: \(moved.stdout)")
        XCTAssertFalse(moved.stderr.contains(secret), "the one-shot's log holds the secret")
        XCTAssertTrue(moved.stderr.contains("moved from the software root to the TPM root"), moved.stderr)
        let again = try enclave.runOnce(tpm: tpm, ["--move-to-tpm"])
        XCTAssertNotEqual(again.status, 0)
        XCTAssertTrue(again.stderr.contains("sealed to a TPM already"), again.stderr)

        let logged = enclave.log().count
        try enclave.start()
        XCTAssertEqual(try root(of: enclave), "tpm")
        XCTAssertFalse(
            enclave.log().dropFirst(logged).contains("no recovery secret was issued"),
            "the one-shot issued it"
        )
        XCTAssertEqual(try read("alice", on: enclave), Data("old secret".utf8))
        XCTAssertEqual(try read("bob", on: enclave), Data("passcode-bound".utf8))
        let sign = KeyRequest(operation: .sign, kind: .signing, blob: keptBlob, message: Data("m".utf8), context: "u")
        guard case .key(let signed) = try enclave.send(.key(sign)) else { return XCTFail("no key reply") }
        XCTAssertNil(signed.problem, "an app's key blob from before key records still signs")
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try XCTUnwrap(signed.signature))
        XCTAssertTrue(keptKey.publicKey.isValidSignature(signature, for: Data("m".utf8)))
        try assertNoneIn(enclave.stateDirectory, of: oldWraps)
        XCTAssertNoThrow(try enclave.setPasscode("5678", current: "1234"), "the old passcode, after the move")

        // The secret the move showed recovers the moved state after a TPM clear.
        enclave.stop()
        try tpm.clear()
        XCTAssertThrowsError(try enclave.start())
        let recovered = try enclave.runOnce(tpm: tpm, ["--recover-tpm-root"], input: secret + "\n")
        XCTAssertEqual(recovered.status, 0, recovered.stderr)
        try enclave.start()
        XCTAssertEqual(try read("alice", on: enclave), Data("old secret".utf8))
        XCTAssertNoThrow(try enclave.setPasscode("1357", current: "5678"))
    }

    /// `move-to-tpm = yes`: a state the daemon made today on the software root moves at start.
    func testAtStartAStateMovesKeepingEverythingAndItsCopiesOpenNothing() async throws {
        let tpm = try simulator()
        let software = try enclave(tpm: "off")
        // A SecKey held in the daemon, an item, two wrong passcodes and the attestation root.
        let (publicKey, item): (SecKey, OSStatus) = try software.run {
            var error: Unmanaged<CFError>?
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: Data("moved.key".utf8),
                ] as [String: Any],
            ]
            let key = try XCTUnwrap(SecKeyCreateRandomKey(attributes as CFDictionary, &error), "\(error as Any)")
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "mail",
                kSecAttrAccount as String: "alice", kSecValueData as String: Data("kept".utf8),
            ]
            return (try XCTUnwrap(SecKeyCopyPublicKey(key)), SecItemAdd(item as CFDictionary, nil))
        }
        XCTAssertEqual(item, errSecSuccess)
        for wrong in ["0000", "1111"] { XCTAssertThrowsError(try software.setPasscode("5678", current: wrong)) }
        let before = try software.status()
        XCTAssertEqual(before.passcodeFailures, 2)
        let attestationRoot = try runProcess(
            productPath("lactl"),
            ["attestation-root", "--socket", software.socketPath]
        )
        XCTAssertEqual(try root(of: software), "software")
        software.stop()
        let oldWraps = try wrappedClassKeys(software)
        XCTAssertFalse(oldWraps.isEmpty)
        // A move a stop cut before it committed: its counter defined, its pending blob written.
        let cutSecret = (0..<32).map { UInt8($0) }
        let cutAuth = MasterKeyRoot.counterAuth(tpmSecret: cutSecret)
        let cutCounter = try TPMDevice.defineCounter(auth: cutAuth, tcti: tpm.tcti)
        let cutBlob = try TPMDevice.seal(cutSecret, tcti: tpm.tcti)
        try (withUnsafeBytes(of: cutCounter.index.bigEndian) { Data($0) } + cutBlob).write(
            to: URL(fileURLWithPath: software.stateDirectory + "/tpm-root.blob.moving")
        )

        let machine = try enclave(tpm: tpm.tcti)
        try machine.takeState(of: software)
        try "move-to-tpm = yes\n".write(
            toFile: machine.directory + "/laenclaved.conf",
            atomically: true,
            encoding: .utf8
        )
        try machine.start()
        XCTAssertTrue(machine.log().contains("interrupted before it took effect"), machine.log())
        XCTAssertTrue(machine.log().contains("the counter it defined is removed"), machine.log())
        XCTAssertThrowsError(try TPMDevice.readCounter(index: cutCounter.index, auth: cutAuth, tcti: tpm.tcti)) {
            XCTAssertTrue(($0 as? DaemonError)?.tpmObjectMissing == true, "\($0)")
        }
        XCTAssertTrue(machine.log().contains("moved from the software root to the TPM root"), machine.log())
        XCTAssertTrue(machine.log().contains("no recovery secret was issued"), "said, with its command")
        XCTAssertEqual(try root(of: machine), "tpm")
        XCTAssertNil(try machine.status().stateRefused, "bound to a rollback counter")
        let after = try machine.status()
        XCTAssertEqual(after.passcodeFailures, 2, "counters are kept")
        XCTAssertEqual(after.enrolledCount, before.enrolledCount)
        XCTAssertEqual(after.domainState, before.domainState, "the same enrolment state for apps")
        let rootAfter = try runProcess(productPath("lactl"), ["attestation-root", "--socket", machine.socketPath])
        XCTAssertEqual(rootAfter.stdout, attestationRoot.stdout, "servers keep trusting this daemon's keys")
        try assertNoneIn(machine.stateDirectory, of: oldWraps)

        // The key file tests no guess of the moved verifier, even with the TPM's half guessed as it.
        let hostKey = try keyFile(of: machine)
        let verifier = try storedVerifier(machine)
        XCTAssertEqual(verifier.priorKeyed, true)
        let fromKeyFile = KeyHierarchy.passcodeKey(master: hostKey, uid: getuid())
        XCTAssertFalse(verifier.matches(try verifier.derive("1234", key: fromKeyFile, prior: fromKeyFile)))
        // What a thief computes from the right passcode: scrypt as stored, and keyed as before the move.
        var plain = verifier
        plain.keyed = nil
        plain.priorKeyed = nil
        let scrypt = try plain.derive("1234")
        XCTAssertNotEqual(verifier.hash, scrypt)
        XCTAssertNotEqual(verifier.hash, Data(HMAC<SHA256>.authenticationCode(for: scrypt, using: fromKeyFile)))
        XCTAssertNil(verifier.length, "the passcode's length is not in the clear")

        try await machine.run {
            XCTAssertEqual(try read("alice", on: machine), Data("kept".utf8))
            var found: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("moved.key".utf8),
                kSecReturnRef as String: true,
            ]
            XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &found), errSecSuccess)
            let key = try XCTUnwrap(found as! SecKey?)
            var error: Unmanaged<CFError>?
            let message = Data("made before the move".utf8) as CFData
            let signature = try XCTUnwrap(
                SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error),
                "\(error as Any)"
            )
            XCTAssertTrue(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message, signature, nil))
            // The passcode checks, and its verifier is remade under the TPM root's key alone.
            try machine.queue(.passcode("1234"))
            let context = LAContext()
            let passed = try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "after the move")
            XCTAssertTrue(passed)
        }
        XCTAssertEqual(try machine.status().passcodeFailures, 0)
        let remade = try storedVerifier(machine)
        XCTAssertNil(remade.priorKeyed, "remade on its first success")
        XCTAssertTrue(remade.isKeyed)

        // A stop between the move's commit and its blob's name: the pending file (the counter's
        // index, then the blob) and no blob. The next start finishes it.
        machine.stop()
        let database = try DatabaseQueue(path: machine.stateDirectory + "/enclave.sqlite")
        let anchor = try await database.read { db in
            try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'rollbackAnchor'")
        }
        try database.close()
        let index = try XCTUnwrap(
            (try JSONSerialization.jsonObject(with: XCTUnwrap(anchor)) as? [String: Any])?["index"] as? Int
        )
        let blob = try Data(contentsOf: URL(fileURLWithPath: machine.stateDirectory + "/tpm-root.blob"))
        try (withUnsafeBytes(of: UInt32(index).bigEndian) { Data($0) } + blob).write(
            to: URL(fileURLWithPath: machine.stateDirectory + "/tpm-root.blob.moving")
        )
        try FileManager.default.removeItem(atPath: machine.stateDirectory + "/tpm-root.blob")
        try machine.start()
        XCTAssertTrue(machine.log().contains("is finished"), machine.log())
        XCTAssertEqual(try read("alice", on: machine), Data("kept".utf8))
        XCTAssertEqual(machine.log().components(separatedBy: "moved from the software root").count, 2, "moved once")

        // Copied with its key file to a machine without a TPM, or with another: nothing opens.
        machine.stop()
        let noTPM = try enclave(tpm: "off")
        try noTPM.takeState(of: machine)
        XCTAssertThrowsError(try noTPM.start(), "a moved state copied to a machine without a TPM")
        XCTAssertTrue(noTPM.log().contains("sealed to a TPM"), noTPM.log())
        let elsewhere = try enclave(tpm: try simulator().tcti)
        try elsewhere.takeState(of: machine)
        XCTAssertThrowsError(try elsewhere.start(), "a moved state copied to another TPM")
        XCTAssertTrue(elsewhere.log().contains("does not open with"), elsewhere.log())
        try machine.start()
        XCTAssertEqual(try read("alice", on: machine), Data("kept".utf8))

        // Attack: the backup from before the move put back beside the same key file, to take the
        // passcode counters back. The marker the move left beside the key file refuses it.
        machine.stop()
        try FileManager.default.moveItem(atPath: machine.stateDirectory, toPath: machine.stateDirectory + ".moved")
        try FileManager.default.copyItem(atPath: software.stateDirectory, toPath: machine.stateDirectory)
        XCTAssertThrowsError(try machine.start(), "a copy from before the move started")
        XCTAssertTrue(machine.log().contains("a copy from before the move"), machine.log())

        // A new state made later with the same key file is not such a copy: it starts, and again.
        let fresh = try enclave(tpm: "off")
        fresh.stop()
        let files = FileManager.default
        try files.removeItem(atPath: fresh.stateDirectory)
        for name in ["master.key", "master.key.moved-to-tpm"] {
            try? files.removeItem(atPath: fresh.directory + "/keys/" + name)
            try files.copyItem(atPath: machine.directory + "/keys/" + name, toPath: fresh.directory + "/keys/" + name)
        }
        try fresh.start()
        fresh.stop()
        try fresh.start()
        XCTAssertEqual(try root(of: fresh), "software")
    }
}
