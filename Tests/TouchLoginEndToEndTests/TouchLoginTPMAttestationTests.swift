import CryptoKit
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import TouchLoginAPI
import TouchLoginClient
import WebAuthn
import XCTest

/// Hardware attestation end to end (issue 31, item 6): a daemon sealed to a swtpm that
/// `swtpm_setup` endorsed under a local CA (the "TPM maker"), the login server as the CA of TPM
/// attestation keys (`--tpm-maker-roots`), and the client registering with WebAuthn's `tpm`
/// statement. py_webauthn checks the same statement under the server's attestation-key CA.
final class TouchLoginTPMAttestationTests: XCTestCase {
    private var tpm: SwtpmSimulator!
    private var enclave: TestEnclave!
    private var makers: String!

    override func setUpWithError() throws {
        guard SwtpmSimulator.available, SwtpmSimulator.manufacturable else {
            throw XCTSkip("needs swtpm and swtpm_setup (scripts/setup-debian installs them)")
        }
        tpm = try SwtpmSimulator(endorsed: true)
        enclave = try TestEnclave.sealed(to: tpm)
        makers = try Self.makerFile(tpm, in: enclave.directory)
    }

    override func tearDown() {
        enclave?.stop()
        enclave = nil
        tpm?.destroy()
        tpm = nil
    }

    /// The maker's root and issuing certificates, as a server's `--tpm-maker-roots` file.
    private static func makerFile(_ tpm: SwtpmSimulator, in directory: String) throws -> String {
        let path = directory + "/makers-\(UUID().uuidString).pem"
        let pem = try [tpm.endorsementRoot, tpm.endorsementIssuer].map {
            try String(contentsOfFile: try XCTUnwrap($0), encoding: .utf8)
        }.joined()
        try pem.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func daemonRoot(_ daemon: TestEnclave) throws -> String {
        let printed = try runProcess(productPath("lactl"), ["attestation-root", "--socket", daemon.socketPath])
        XCTAssertEqual(printed.status, 0, printed.stderr)
        let path = daemon.directory + "/root-\(UUID().uuidString).pem"
        try printed.stdout.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A test daemon is both.
    private let testing = ["--attestation-allows-user-daemons", "--attestation-allows-simulation"]

    /// Through the `touchlogin` binary: a server that requires a hardware root (and laenclaved's
    /// statement of how the key is guarded) binds the key with a `tpm` statement and shows the
    /// TPM; a server trusting another maker, or a daemon on the software root, is refused with
    /// the reason; a server that takes packed too binds it as packed, and the person is told.
    func testAServerThatRequiresAHardwareRootBindsATPMKeyAndRefusesOthers() throws {
        let strict = ["--tpm-maker-roots", makers!, "--require-hardware-root", "--require-attestation"]
        let server = try LoginServerProcess(strict + [try daemonRoot(enclave)] + testing)
        let client = LoginClient(enclave: enclave, server: server)
        try client.signUpAndEnable()
        let status =
            try JSONSerialization.jsonObject(with: Data(try client.run(["status", "--json"]).stdout.utf8))
            as! [String: Any]
        let device = try XCTUnwrap((status["devices"] as? [[String: Any]])?.first)
        let attested = device["attestedKey"] as? String ?? "not attested"
        XCTAssertTrue(attested.contains("biometryCurrentSet"), attested)
        XCTAssertTrue(attested.hasSuffix("; TPM id:49424D00 swtpm"), attested)
        try enclave.queue(.match)
        XCTAssertTrue(try client.run([]).stdout.contains("with your fingerprint"))

        let otherMaker = try SwtpmSimulator(endorsed: true)
        defer { otherMaker.destroy() }
        let software = try TestEnclave()
        for (daemon, arguments, reason) in [
            (
                enclave!, ["--tpm-maker-roots", try Self.makerFile(otherMaker, in: enclave.directory)],
                "does not chain to a TPM maker"
            ),
            // Told by the client at once, before any touch (the server's own refusal of a packed
            // registration: LoginServiceTPMTests).
            (software, ["--tpm-maker-roots", makers!], "binds only keys a TPM holds"),
        ] {
            let refusing = try LoginServerProcess(arguments + ["--require-hardware-root"])
            let refused = LoginClient(enclave: daemon, server: refusing)
            XCTAssertEqual(try refused.run(["signup", "--username", "bob"], input: "correct horse\n").status, 0)
            try daemon.queue(.match)
            let enable = try refused.run([], input: "correct horse\ny\n")
            XCTAssertTrue((enable.stdout + enable.stderr).contains(reason), enable.stdout + enable.stderr)
            XCTAssertFalse(enable.stdout.contains("Fingerprint login is enabled"), enable.stdout)
        }
        // Where the server takes packed too, a TPM it will not certify costs nothing: packed
        // instead, and the person is told.
        let lenient = try LoginServerProcess([
            "--tpm-maker-roots", try Self.makerFile(otherMaker, in: enclave.directory),
        ])
        let fallback = LoginClient(enclave: enclave, server: lenient)
        XCTAssertEqual(try fallback.run(["signup", "--username", "carol"], input: "correct horse\n").status, 0)
        try enclave.queue(.match)
        let enabled = try fallback.run([], input: "correct horse\ny\n")
        XCTAssertTrue(enabled.stdout.contains("Fingerprint login is enabled"), enabled.stdout + enabled.stderr)
        XCTAssertTrue(
            (enabled.stdout + enabled.stderr).contains("The TPM's attestation did not go through"),
            enabled.stdout + enabled.stderr
        )
    }

    /// py_webauthn verifies our `tpm` registration (§8.3: pubArea, certInfo, the aikCert's rules and
    /// its chain) under the server's attestation-key CA, and refuses it under another CA.
    func testAnIndependentVerifierAcceptsOurTPMAttestationUnderTheServersCAOnly() async throws {
        guard let python = ProcessInfo.processInfo.environment["TOUCHLOGIN_INTEROP_PYTHON"],
            FileManager.default.isExecutableFile(atPath: python)
        else { throw XCTSkip("no interop Python: run through scripts/test, which makes it (scripts/setup-interop)") }
        let server = try LoginServerProcess(["--tpm-maker-roots", makers!])
        let api = LoginAPIClient(baseURL: URL(string: server.baseURL)!)
        let session = try await api.createAccount(username: "carol", password: "correct horse")
        let origin = "http://localhost:8080"
        let registrationChallenge = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64URLEncodedString()
        let assertionChallenge = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64URLEncodedString()
        var creation = PublicKeyCredentialCreationOptionsJSON(
            rp: .init(id: "localhost", name: "interop"),
            user: .init(id: Data("user".utf8).base64URLEncodedString(), name: "u", displayName: "u"),
            challenge: registrationChallenge
        )
        creation.attestation = "direct"
        creation.attestationFormats = ["tpm"]
        let enclave = self.enclave!
        let (registration, assertion) = try await enclave.run {
            let aikCertificate = try await EnclaveAuthenticator.attestationKeyCertificate(
                options: creation,
                api: api,
                token: session.token
            )
            let authenticator = EnclaveAuthenticator(origin: origin)
            let context = LAContext()
            try enclave.queue(.match)
            let registration = try authenticator.register(
                options: creation,
                deviceName: "test",
                context: context,
                attestationKeyCertificate: try XCTUnwrap(aikCertificate)
            )
            let (assertion, _) = try authenticator.assert(
                options: PublicKeyCredentialRequestOptionsJSON(challenge: assertionChallenge, rpId: "localhost"),
                binding: registration.binding,
                context: context
            )
            return (registration, assertion.credential)
        }
        let (status, _, _) = try server.http("GET", "/api/tpm/root")
        XCTAssertEqual(status, 200)
        let root = try String(contentsOf: URL(string: server.baseURL + "/api/tpm/root")!, encoding: .utf8)
        let otherCA = try LoginServerProcess(["--tpm-maker-roots", makers!])
        let otherRoot = try String(contentsOf: URL(string: otherCA.baseURL + "/api/tpm/root")!, encoding: .utf8)
        func verify(under attestationRoot: String) throws -> ProcessOutput {
            let record: [String: Any] = [
                "rpId": "localhost", "origin": origin, "attestationRoot": attestationRoot,
                "registration": [
                    "challenge": registrationChallenge,
                    "credential": try JSONSerialization.jsonObject(
                        with: JSONEncoder().encode(registration.request.credential)
                    ),
                ],
                "assertion": [
                    "challenge": assertionChallenge,
                    "credential": try JSONSerialization.jsonObject(with: JSONEncoder().encode(assertion)),
                ],
            ]
            let path = enclave.directory + "/record-\(UUID().uuidString).json"
            try JSONSerialization.data(withJSONObject: record).write(to: URL(fileURLWithPath: path))
            let interop = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("interop/verify_with_py_webauthn.py").path
            return try runProcess(python, [interop, path])
        }
        let trusted = try verify(under: root)
        XCTAssertEqual(trusted.status, 0, trusted.stdout + trusted.stderr)
        XCTAssertTrue(trusted.stdout.contains("fmt=tpm"), trusted.stdout)
        XCTAssertTrue(trusted.stdout.contains("assertion verified: new_sign_count=1 uv=True"), trusted.stdout)
        let untrusted = try verify(under: otherRoot)
        XCTAssertEqual(untrusted.status, 1, untrusted.stdout)
        XCTAssertTrue(untrusted.stdout.contains("REJECTED"), untrusted.stdout)
    }

    /// Attacks on the certification: an attestation key of another TPM presented with this TPM's
    /// endorsement (the credential is bound to that key's name: this TPM cannot open it), and a
    /// guessed secret; neither gets a certificate. The genuine answer does.
    func testAnAttestationKeyNotInTheEndorsedTPMGetsNoCertificate() async throws {
        let otherTPM = try SwtpmSimulator(endorsed: true)
        defer { otherTPM.destroy() }
        let other = try TestEnclave.sealed(to: otherTPM)
        defer { other.stop() }
        let server = try LoginServerProcess(["--tpm-maker-roots", makers!])
        let api = LoginAPIClient(baseURL: URL(string: server.baseURL)!)
        let token = try await api.createAccount(username: "mallory", password: "correct horse").token
        let ours = try enclave.run { try SecureEnclave.tpmEndorsement() }
        let theirs = try other.run { try SecureEnclave.tpmEndorsement() }
        func presented(_ attestationKey: Data) -> TPMAttestationKeyChallengeRequest {
            TPMAttestationKeyChallengeRequest(
                endorsementKey: ours.endorsementKey.base64URLEncodedString(),
                endorsementCertificate: ours.endorsementCertificate!.base64URLEncodedString(),
                attestationKey: attestationKey.base64URLEncodedString()
            )
        }
        func open(_ challenge: TPMAttestationKeyChallengeResponse) throws -> Data {
            try enclave.run {
                try SecureEnclave.activateTPMCredential(
                    credentialBlob: Data(base64URLEncoded: challenge.credentialBlob)!,
                    encryptedSecret: Data(base64URLEncoded: challenge.encryptedSecret)!
                )
            }
        }

        func refused(_ key: Data, _ challenge: TPMAttestationKeyChallengeResponse, _ secret: Data, _ what: String) async
        {
            do {
                _ = try await api.tpmAttestationKeyCertificate(
                    token: token,
                    .init(key: presented(key), token: challenge.token, secret: secret.base64URLEncodedString())
                )
                XCTFail(what)
            } catch {
                XCTAssertEqual((error as? APIError)?.code, APIError.Code.attestationUntrusted.rawValue, "\(error)")
            }
        }

        let forged = try await api.tpmAttestationKeyChallenge(token: token, presented(theirs.attestationKey))
        XCTAssertThrowsError(try open(forged), "this TPM opens no credential bound to another TPM's key")
        for guess in [Data(count: 32), Data((0..<32).map { _ in UInt8.random(in: 0...255) })] {
            await refused(theirs.attestationKey, forged, guess, "a guessed secret was certified")
        }
        let genuine = try await api.tpmAttestationKeyChallenge(token: token, presented(ours.attestationKey))
        let secret = try open(genuine)
        await refused(theirs.attestationKey, genuine, secret, "the secret opened for our key certified another")
        let issued = try await api.tpmAttestationKeyCertificate(
            token: token,
            .init(key: presented(ours.attestationKey), token: genuine.token, secret: secret.base64URLEncodedString())
        )
        XCTAssertNotNil(Data(base64URLEncoded: issued.certificate))
        XCTAssertTrue(issued.root.hasPrefix("-----BEGIN CERTIFICATE-----"), issued.root)
    }
}
