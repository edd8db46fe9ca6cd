import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import Security
import XCTest

/// The TPM root's recovery secret (issue 31, item 2): root issues it (shown once, on standard
/// output, never written); a TPM cleared (new seeds, as after a firmware reset or a new mainboard)
/// opens the sealed state no more, and root seals it again with the secret: every item is there. A
/// wrong secret, and one issued before the newest, open nothing.
final class TPMRootRecoveryTests: XCTestCase {
    private var tpm: SwtpmSimulator!
    private var enclave: TestEnclave!

    override func setUpWithError() throws {
        guard SwtpmSimulator.available else { throw XCTSkip("needs swtpm (scripts/setup-debian installs it)") }
        tpm = try SwtpmSimulator()
        enclave = try TestEnclave.sealed(to: tpm)
    }

    override func tearDown() {
        enclave?.stop()
        enclave = nil
        tpm?.destroy()
        tpm = nil
    }

    private static var query: [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bank.example",
            kSecAttrAccount as String: "alice",
        ]
    }

    private func read() -> Data? {
        enclave.run {
            var query = Self.query
            query[kSecReturnData as String] = true
            var result: CFTypeRef?
            return SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess ? result as? Data : nil
        }
    }

    private func recover(with secret: String) throws -> ProcessOutput {
        try enclave.runOnce(tpm: tpm, ["--recover-tpm-root"], input: secret + "\n")
    }

    private func issue() throws -> String {
        let issued = try enclave.runOnce(tpm: tpm, ["--issue-tpm-recovery"])
        XCTAssertEqual(issued.status, 0, issued.stderr)
        let secret = issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertFalse(issued.stderr.contains(secret), "the one-shot's own log holds the secret")
        return secret
    }

    /// The daemon's TPM attestation key (its public area), made on first use.
    private func attestationKey() throws -> Data? {
        guard
            case .key(let reply) = try enclave.send(
                .key(KeyRequest(operation: .tpmEndorsement, kind: .signing, context: "u"))
            )
        else { return nil }
        return reply.tpm?.attestationKey
    }

    func testAClearedTPMIsRecoveredWithTheRecoverySecretAndNothingElse() throws {
        let attestationBefore = try XCTUnwrap(try attestationKey())
        enclave.run {
            var item = Self.query
            item[kSecValueData as String] = Data("the secret".utf8)
            XCTAssertEqual(SecItemAdd(item as CFDictionary, nil), errSecSuccess)
        }
        XCTAssertTrue(enclave.log().contains("no recovery secret was issued"), enclave.log())
        enclave.stop()
        let first = try issue()
        let secret = try issue()
        XCTAssertEqual(secret.count, 79, "16 groups of 4 hexadecimal digits: \(secret)")
        XCTAssertNotEqual(first, secret)
        // Shown once: in no file of the daemon's and not in its log.
        let files = FileManager.default.enumerator(atPath: enclave.directory)?.allObjects as? [String] ?? []
        let compact = Array(secret.filter(\.isHexDigit).utf8)
        for file in files {
            let bytes = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: enclave.directory + "/" + file))) ?? Data())
            XCTAssertNil(bytes.firstRange(of: Array(secret.utf8)), "the recovery secret is in \(file)")
            XCTAssertNil(bytes.firstRange(of: compact), "the recovery secret is in \(file)")
        }
        let logged = enclave.log().count
        try enclave.start()
        XCTAssertFalse(enclave.log().contains(secret))
        XCTAssertFalse(enclave.log().dropFirst(logged).contains("no recovery secret was issued"), "issued now")
        enclave.stop()
        XCTAssertNotEqual(try recover(with: secret).status, 0, "nothing to recover while the TPM opens the state")

        try tpm.clear()
        XCTAssertThrowsError(try enclave.start(), "a cleared TPM opened the state")
        XCTAssertTrue(enclave.log().contains("--recover-tpm-root"), enclave.log())

        // A wrong secret, one issued before the newest, and one that is not a secret at all.
        var wrong = Array(secret)
        wrong[0] = wrong[0] == "0" ? "1" : "0"
        let refused = try recover(with: String(wrong))
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("does not open this state's recovery box"), refused.stderr)
        XCTAssertNotEqual(try recover(with: first).status, 0, "a secret issued before the newest")
        XCTAssertNotEqual(try recover(with: "1234").status, 0)
        XCTAssertThrowsError(try enclave.start(), "a wrong secret sealed the state again")

        let recovered = try recover(with: secret)
        XCTAssertEqual(recovered.status, 0, recovered.stderr + enclave.log())
        try enclave.start()
        XCTAssertEqual(read(), Data("the secret".utf8))
        XCTAssertNil(try enclave.status().stateRefused, "a new counter is bound with it")
        let attestationAfter = try XCTUnwrap(try attestationKey(), "attestation works on the TPM it has now")
        XCTAssertNotEqual(attestationAfter, attestationBefore, "an attestation key of this TPM's")
        XCTAssertNoThrow(try enclave.setPasscode("5678", current: "1234"))
        // And the TPM's rollback counter guards it again.
        enclave.stop()
        try enclave.start()
        XCTAssertNil(try enclave.status().stateRefused)
    }

    /// A one-shot on a state that is not sealed to a TPM fails, rather than report success.
    func testRecoveryOfAStateNotSealedToATPMFails() throws {
        let software = try TestEnclave()
        software.stop()
        let run = try software.runOnce(
            tpm: tpm,
            ["--recover-tpm-root"],
            input: String(repeating: "ab", count: 32) + "\n"
        )
        XCTAssertNotEqual(run.status, 0)
        XCTAssertTrue(run.stderr.contains("no state sealed to a TPM"), run.stderr)
    }
}
