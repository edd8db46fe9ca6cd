import Crypto
import EnclaveCore
import Foundation
import GRDB
import IntegrationSupport
import LocalAuthenticationTesting
import Security
import XCTest

/// The disk is not the Secure Enclave (issue 31): an app's secret stored on a daemon, then the
/// state directory and key file copied and started elsewhere, as a backup, a stolen disk or a
/// minute of root would give them. With the software root the copy hands the app its secret (the
/// attack, kept as the software root's limit); with the TPM root (swtpm here) the copy opens
/// nothing on another TPM or on none, the state alone with the TPM and another key file opens
/// nothing either, and the original goes on working.
final class HardwareRootAttackTests: XCTestCase {
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

    private func enclave(tpm: String) throws -> TestEnclave {
        var configuration = TestEnclave.Configuration()
        configuration.tpm = tpm
        let enclave = try TestEnclave(configuration)
        enclaves.append(enclave)
        return enclave
    }

    private func simulator() throws -> SwtpmSimulator {
        let tpm = try SwtpmSimulator()
        tpms.append(tpm)
        return tpm
    }

    private static var query: [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bank.example",
            kSecAttrAccount as String: "alice",
        ]
    }

    private func store(on enclave: TestEnclave) {
        enclave.run {
            var item = Self.query
            item[kSecValueData as String] = Data("the secret".utf8)
            XCTAssertEqual(SecItemAdd(item as CFDictionary, nil), errSecSuccess)
        }
    }

    private func read(on enclave: TestEnclave) -> Data? {
        enclave.run {
            var query = Self.query
            query[kSecReturnData as String] = true
            var result: CFTypeRef?
            return SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess ? result as? Data : nil
        }
    }

    /// The thief's daemon: `enclave`'s own directory, its state and (when `keyFile`) its key file
    /// replaced by the victim's, then started.
    private func startWithStolenState(_ thief: TestEnclave, from victim: TestEnclave, keyFile: Bool = true) throws {
        try thief.takeState(of: victim, keyFile: keyFile)
        try thief.start()
    }

    /// What `lactl status --json` says of the daemon's root.
    private func root(of enclave: TestEnclave) throws -> String? {
        let out = try runProcess(productPath("lactl"), ["status", "--json", "--socket", enclave.socketPath])
        let json = try JSONSerialization.jsonObject(with: Data(out.stdout.utf8)) as? [String: Any]
        return json?["root"] as? String
    }

    private func log(_ enclave: TestEnclave) -> String {
        (try? String(contentsOfFile: enclave.logPath, encoding: .utf8)) ?? ""
    }

    func testWithTheSoftwareRootACopiedStateAndKeyFileOpenEverything() throws {
        let victim = try enclave(tpm: "off")
        store(on: victim)
        victim.stop()
        let thief = try enclave(tpm: "off")
        try startWithStolenState(thief, from: victim)
        XCTAssertEqual(read(on: thief), Data("the secret".utf8), "the software root's limit, which the TPM root closes")
        XCTAssertEqual(try root(of: thief), "software")
    }

    func testWithTheTPMRootACopyOpensNothingElsewhere() throws {
        let machine = try simulator()
        let elsewhere = try simulator()
        let victim = try enclave(tpm: machine.tcti)
        store(on: victim)
        XCTAssertTrue(FileManager.default.fileExists(atPath: victim.stateDirectory + "/tpm-root.blob"))
        victim.stop()

        // The state directory and key file on a machine with another TPM.
        let thief = try enclave(tpm: elsewhere.tcti)
        XCTAssertThrowsError(try startWithStolenState(thief, from: victim), "a copy started on another TPM")
        XCTAssertTrue(log(thief).contains("does not open"), log(thief))

        // On a machine with no TPM (the thief's daemon told to do without one).
        let noTPM = try enclave(tpm: "off")
        XCTAssertThrowsError(try startWithStolenState(noTPM, from: victim), "a copy started without a TPM")
        XCTAssertTrue(log(noTPM).contains("sealed to a TPM"), log(noTPM))

        // A downgrade: the copy without its blob, so the state would look like the software root's.
        let stripped = try enclave(tpm: elsewhere.tcti)
        try stripped.takeState(of: victim)
        try FileManager.default.removeItem(atPath: stripped.stateDirectory + "/tpm-root.blob")
        XCTAssertThrowsError(try stripped.start(), "a copy stripped of its blob")
        XCTAssertTrue(log(stripped).contains("tpm-root.blob is missing"), log(stripped))

        // The TPM itself with the state but another key file (the TPM alone gives nothing).
        let sameTPM = try enclave(tpm: machine.tcti)
        XCTAssertThrowsError(
            try startWithStolenState(sameTPM, from: victim, keyFile: false),
            "the state with its TPM, without its key file"
        )
        XCTAssertTrue(log(sameTPM).contains("does not belong to the state"), log(sameTPM))

        // The victim's own daemon, its TPM restarted as a machine's through a reboot.
        machine.stop()
        try machine.start()
        try victim.start()
        XCTAssertEqual(read(on: victim), Data("the secret".utf8))
        XCTAssertEqual(try root(of: victim), "tpm")
        // The master key never reaches the disk through a core file.
        let limits = try String(contentsOfFile: "/proc/\(victim.processID)/limits", encoding: .utf8)
        let core = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }
        XCTAssertEqual(
            core?.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2).map(String.init),
            ["0", "0"],
            "\(core ?? "")"
        )
        // Nor through swap: the pages that hold it are locked in memory.
        let status = try String(contentsOfFile: "/proc/\(victim.processID)/status", encoding: .utf8)
        let locked = status.split(separator: "\n").first { $0.hasPrefix("VmLck:") }
        XCTAssertNotEqual(
            locked?.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first,
            "0",
            "\(locked ?? "")"
        )
        let doctor = try runProcess(productPath("lactl"), ["doctor", "--socket", victim.socketPath])
        XCTAssertTrue(doctor.stdout.contains("sealed to a TPM 2.0"), doctor.stdout)
    }

    /// Attack: a copy of the state guesses the passcode offline — scrypt with the salt stored
    /// beside it, every 4-digit passcode tried on the thief's own machines, no counter at all (the
    /// passcode's length in the clear told how many digits). Now the verifier is keyed by what the
    /// master key derives, which on the TPM root needs the TPM: the right passcode itself does not
    /// match in the copy, with the key file or without, and the length is not in it.
    func testACopiedVerifierTestsNoGuess() throws {
        let machine = try simulator()
        let victim = try enclave(tpm: machine.tcti)
        victim.stop()
        let queue = try DatabaseQueue(path: victim.stateDirectory + "/enclave.sqlite")
        let stored = try queue.read { db in try Data.fetchOne(db, sql: "SELECT passcode FROM user") }
        try queue.close()
        let json = try XCTUnwrap(stored)
        let fields = try XCTUnwrap(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        XCTAssertNil(fields["length"], "the passcode's length is in the copy: \(fields.keys)")
        let verifier = try JSONDecoder().decode(PasscodeVerifier.self, from: json)

        // The thief's guesses, the right one ("1234", TestEnclave's) among them: scrypt as stored.
        for guess in ["0000", "1111", "1234", "9999"] {
            var unkeyed = verifier
            unkeyed.keyed = nil
            XCTAssertFalse(unkeyed.matches(try unkeyed.derive(guess)), "the copy tested \(guess)")
            XCTAssertThrowsError(try verifier.derive(guess), "a keyed verifier needs its key")
        }
        // With the key file too, as if it were the master key (the software root's): still no.
        let keyFile = try Data(contentsOf: URL(fileURLWithPath: victim.directory + "/keys/master.key"))
        let uid = UInt32(getuid())
        let guessedKey = KeyHierarchy.passcodeKey(master: SymmetricKey(data: keyFile), uid: uid)
        XCTAssertFalse(verifier.matches(try verifier.derive("1234", key: guessedKey)), "the key file alone keyed it")
        XCTAssertNil(verifier.length(key: guessedKey))

        // The daemon itself, with its TPM, still checks it.
        try victim.start()
        XCTAssertNoThrow(try victim.setPasscode("5678", current: "1234"))
    }
}
