import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import Security
import XCTest

/// The TPM root's recovery secret (issue 31, item 2): a TPM cleared (new seeds, as after a
/// firmware reset or a new mainboard) opens the sealed state no more; root seals it again with the
/// recovery secret written when the TPM root was set up, and every item is there. A wrong secret
/// opens nothing.
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

    func testAClearedTPMIsRecoveredWithTheRecoverySecretAndNothingElse() throws {
        enclave.run {
            var item = Self.query
            item[kSecValueData as String] = Data("the secret".utf8)
            XCTAssertEqual(SecItemAdd(item as CFDictionary, nil), errSecSuccess)
        }
        let path = enclave.directory + "/keys/tpm-recovery-secret"
        let secret = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(secret.count, 79, "16 groups of 4 hexadecimal digits: \(secret)")
        let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? 0
        XCTAssertEqual(mode, 0o600)
        XCTAssertTrue(enclave.log().contains(path), "the log says where the secret is")

        enclave.stop()
        try tpm.clear()
        XCTAssertThrowsError(try enclave.start(), "a cleared TPM opened the state")
        XCTAssertTrue(enclave.log().contains("--recover-tpm-root"), enclave.log())

        // A wrong secret, and one that is not a secret at all, open nothing.
        var wrong = Array(secret)
        wrong[0] = wrong[0] == "0" ? "1" : "0"
        let refused = try recover(with: String(wrong))
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("does not open this state's recovery box"), refused.stderr)
        XCTAssertNotEqual(try recover(with: "1234").status, 0)
        XCTAssertThrowsError(try enclave.start(), "a wrong secret sealed the state again")

        let recovered = try recover(with: secret)
        XCTAssertEqual(recovered.status, 0, recovered.stderr + enclave.log())
        try enclave.start()
        XCTAssertEqual(read(), Data("the secret".utf8))
        XCTAssertNil(try enclave.status().stateRefused, "a new counter is bound with it")
        XCTAssertNoThrow(try enclave.setPasscode("5678", current: "1234"))
        // And the TPM's rollback counter guards it again.
        enclave.stop()
        try enclave.start()
        XCTAssertNil(try enclave.status().stateRefused)
    }
}
