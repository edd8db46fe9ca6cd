import Crypto
import Foundation
import IntegrationSupport
import XCTest

@testable import EnclaveServer

/// Secure Enclave keys inside a real TPM 2.0 (swtpm): made by the TPM, which states their public
/// key; signing and agreement run inside it; the blob loads on that TPM only, and only with the
/// key's auth value, which never crosses the bus in clear, nor does an agreement's secret. Checked
/// from outside with tpm2-tools as well as through `TPMDevice`.
final class TPMDeviceKeysTests: XCTestCase {
    private var tpm: SwtpmSimulator!
    private var directory: String!

    override func setUpWithError() throws {
        guard SwtpmSimulator.available else { throw XCTSkip("needs swtpm (scripts/setup-debian installs it)") }
        tpm = try SwtpmSimulator()
        directory = NSTemporaryDirectory() + "tpm-keys-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
    }

    override func tearDown() {
        tpm?.destroy()
        tpm = nil
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }

    private let auth = (0..<32).map { UInt8(0x3C ^ $0) }

    private func create(
        signing: Bool,
        agreement: Bool,
        tcti: String? = nil,
        primary: TPMPrimaryContext
    ) throws
        -> TPMDevice.CreatedKey
    {
        try TPMDevice.createKey(
            signing: signing,
            agreement: agreement,
            auth: auth,
            tcti: tcti ?? tpm.tcti,
            primary: primary
        )
    }

    func testASignatureIsMadeInsideTheTPMAndVerifiesWithTheKeyItStated() throws {
        let primary = TPMPrimaryContext()
        let key = try create(signing: true, agreement: false, primary: primary)
        let publicKey = try P256.Signing.PublicKey(x963Representation: key.publicKey)
        let digest = SHA256.hash(data: Data("challenge".utf8))
        let raw = try TPMDevice.sign(
            digest: Array(digest),
            blob: key.blob,
            auth: auth,
            tcti: tpm.tcti,
            primary: primary
        )
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: raw)
        XCTAssertTrue(publicKey.isValidSignature(signature, for: digest))
        XCTAssertFalse(publicKey.isValidSignature(signature, for: SHA256.hash(data: Data("other".utf8))))

        // A TPM restart (a reboot: its saved contexts no longer load) still signs: the primary's
        // context is made again.
        tpm.stop()
        try tpm.start()
        let again = try TPMDevice.sign(
            digest: Array(digest),
            blob: key.blob,
            auth: auth,
            tcti: tpm.tcti,
            primary: primary
        )
        XCTAssertTrue(
            publicKey.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: again), for: digest)
        )

        var wrong = auth
        wrong[31] ^= 1
        XCTAssertThrowsError(
            try TPMDevice.sign(digest: Array(digest), blob: key.blob, auth: wrong, tcti: tpm.tcti, primary: primary),
            "the blob alone signs nothing"
        ) { error in
            XCTAssertTrue((error as? DaemonError)?.tpmAuthorizationFailed == true, "\(error)")
        }
        let other = try SwtpmSimulator()
        defer { other.destroy() }
        XCTAssertThrowsError(
            try TPMDevice.sign(
                digest: Array(digest),
                blob: key.blob,
                auth: auth,
                tcti: other.tcti,
                primary: TPMPrimaryContext()
            ),
            "another TPM does not load the key"
        )
        let agreementOnly = try create(signing: false, agreement: true, primary: primary)
        XCTAssertThrowsError(
            try TPMDevice.sign(
                digest: Array(digest),
                blob: agreementOnly.blob,
                auth: auth,
                tcti: tpm.tcti,
                primary: primary
            ),
            "an agreement key does not sign"
        )
    }

    func testAnAgreementRunsInsideTheTPMAndNeitherItsSecretNorTheAuthCrossTheBus() throws {
        let capture = directory + "/bus.pcap"
        setenv("TCTI_PCAP_FILE", capture, 1)
        defer { unsetenv("TCTI_PCAP_FILE") }
        let tapped = "pcap:" + tpm.tcti
        let primary = TPMPrimaryContext()
        for (signing, agreement) in [(false, true), (true, true)] {
            let key = try create(signing: signing, agreement: agreement, tcti: tapped, primary: primary)
            let peer = P256.KeyAgreement.PrivateKey()
            let shared = try TPMDevice.agree(
                peer: Array(peer.publicKey.x963Representation),
                blob: key.blob,
                auth: auth,
                tcti: tapped,
                primary: primary
            )
            let expected = try peer.sharedSecretFromKeyAgreement(
                with: P256.KeyAgreement.PublicKey(x963Representation: key.publicKey)
            ).withUnsafeBytes { Array($0) }
            XCTAssertEqual(shared, expected, "the TPM's secret is the peer's")
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: capture)))
            XCTAssertNotNil(bytes.firstRange(of: Array(key.blob.prefix(24))), "the capture holds these commands")
            XCTAssertNil(bytes.firstRange(of: shared), "the shared secret crossed the bus in clear")
            XCTAssertNil(bytes.firstRange(of: auth), "the key's auth value crossed the bus in clear")
        }
        let signingOnly = try create(signing: true, agreement: false, tcti: tapped, primary: primary)
        XCTAssertThrowsError(
            try TPMDevice.agree(
                peer: Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation),
                blob: signingOnly.blob,
                auth: auth,
                tcti: tpm.tcti,
                primary: primary
            ),
            "a signing key does not agree"
        )
    }

    /// From outside, with tpm2-tools: the key's public part, as the TPM wrote it, states the public
    /// key we were given and that the TPM made the private key (sensitivedataorigin) and keeps it
    /// (fixedtpm, fixedparent); its private part loads under this TPM's storage primary.
    func testTPM2ToolsSeeATPMKeyOfThisTPM() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/tpm2_print") else {
            throw XCTSkip("needs tpm2-tools (scripts/setup-debian installs it)")
        }
        let key = try create(signing: true, agreement: false, primary: TPMPrimaryContext())
        let publicSize = Int(key.blob[0]) << 8 | Int(key.blob[1])
        let pub = directory + "/key.pub"
        let priv = directory + "/key.priv"
        try Data(key.blob.prefix(2 + publicSize)).write(to: URL(fileURLWithPath: pub))
        try Data(key.blob.dropFirst(2 + publicSize)).write(to: URL(fileURLWithPath: priv))

        let printed = try runProcess("/usr/bin/tpm2_print", ["-t", "TPM2B_PUBLIC", pub])
        XCTAssertEqual(printed.status, 0, printed.stderr)
        func field(_ name: String) -> String? {
            printed.stdout.split(separator: "\n").lazy.map { $0.trimmingCharacters(in: .whitespaces) }
                .first { $0.hasPrefix(name + ":") }.map {
                    String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces)
                }
        }
        let hex = key.publicKey.map { String(format: "%02x", $0) }.joined()
        XCTAssertEqual(field("x"), String(hex.dropFirst(2).prefix(64)), printed.stdout)
        XCTAssertEqual(field("y"), String(hex.suffix(64)), printed.stdout)
        XCTAssertTrue(
            printed.stdout.contains("value: fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|sign\n"),
            printed.stdout
        )

        var environment = ProcessInfo.processInfo.environment
        environment["TPM2TOOLS_TCTI"] = tpm.tcti
        let primary = try runProcess(
            "/usr/bin/tpm2_createprimary",
            [
                "-C", "o", "-g", "sha256", "-G", "ecc256:aes128cfb", "-a",
                "restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda", "-c",
                directory + "/primary.ctx",
            ],
            environment: environment
        )
        XCTAssertEqual(primary.status, 0, primary.stderr)
        let load = try runProcess(
            "/usr/bin/tpm2_load",
            ["-C", directory + "/primary.ctx", "-u", pub, "-r", priv, "-c", directory + "/key.ctx"],
            environment: environment
        )
        XCTAssertEqual(load.status, 0, "the private part loads under this TPM's primary: \(load.stderr)")
    }

    /// The storage primary is derived once and its saved context loaded back for every later use;
    /// after a TPM reset (a restart) it is derived once more. Counted in the commands on the bus
    /// (TPM2_CreatePrimary, command code 0x131, in a command header).
    func testThePrimaryIsDerivedOnceAndLoadedBackAfter() throws {
        let capture = directory + "/primary.pcap"
        setenv("TCTI_PCAP_FILE", capture, 1)
        defer { unsetenv("TCTI_PCAP_FILE") }
        let tapped = "pcap:" + tpm.tcti
        func derivations() throws -> Int {
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: capture)))
            guard bytes.count >= 10 else { return 0 }
            return (0...(bytes.count - 10)).filter { i in
                bytes[i] == 0x80 && (bytes[i + 1] == 0x01 || bytes[i + 1] == 0x02)
                    && bytes[(i + 6)..<(i + 10)].elementsEqual([0x00, 0x00, 0x01, 0x31])
            }.count
        }
        let primary = TPMPrimaryContext()
        let key = try create(signing: true, agreement: false, tcti: tapped, primary: primary)
        XCTAssertEqual(try derivations(), 1)
        let digest = [UInt8](repeating: 7, count: 32)
        for _ in 0..<3 {
            _ = try TPMDevice.sign(digest: digest, blob: key.blob, auth: auth, tcti: tapped, primary: primary)
        }
        XCTAssertEqual(try derivations(), 1, "the saved context served three signatures")
        tpm.stop()
        try tpm.start()
        _ = try TPMDevice.sign(digest: digest, blob: key.blob, auth: auth, tcti: tapped, primary: primary)
        _ = try TPMDevice.sign(digest: digest, blob: key.blob, auth: auth, tcti: tapped, primary: primary)
        XCTAssertEqual(try derivations(), 2, "after a reset the primary is derived again, once")
    }
}
