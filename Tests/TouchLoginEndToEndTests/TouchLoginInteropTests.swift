import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import TouchLoginClient
import WebAuthn
import XCTest

/// Interoperability with independent WebAuthn implementations (interop/, PyPI's python-fido2 and
/// py_webauthn in the virtual environment scripts/setup-interop makes; $TOUCHLOGIN_INTEROP_PYTHON).
final class TouchLoginInteropTests: XCTestCase {
    private func python() throws -> String {
        guard let python = ProcessInfo.processInfo.environment["TOUCHLOGIN_INTEROP_PYTHON"],
            FileManager.default.isExecutableFile(atPath: python)
        else {
            throw XCTSkip("no interop Python: run through scripts/test, which makes it (scripts/setup-interop)")
        }
        return python
    }

    private var interopDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("interop").path
    }

    /// python-fido2's structures make the registrations (packed and none) and assertions; our server accepts them.
    func testTheServerAcceptsAnIndependentAuthenticator() throws {
        let python = try python()
        let server = try LoginServerProcess()
        let out = try runProcess(python, [interopDirectory + "/fido2_authenticator.py", server.baseURL, "pyuser"])
        XCTAssertEqual(out.status, 0, out.stdout + out.stderr)
        XCTAssertTrue(out.stdout.contains("interop: python-fido2 registrations and assertions accepted"), out.stdout)
    }

    /// A registration and an assertion by our enclave-backed client, written as the record
    /// interop/verify_with_py_webauthn.py reads (with `attestationRoot`, trusted for the chain).
    private struct Ceremony {
        let enclave: TestEnclave
        let origin = "http://localhost:8080"
        let registrationChallenge = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64URLEncodedString()
        let assertionChallenge = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64URLEncodedString()
        var registration: EnclaveAuthenticator.Registration?
        var assertion: AuthenticationResponseJSON?

        /// `attestation`: what the server's options ask ("direct": laenclaved's chain).
        init(_ enclave: TestEnclave, attestation: String? = nil) throws {
            self.enclave = enclave
            let authenticator = EnclaveAuthenticator(origin: origin)
            var creation = PublicKeyCredentialCreationOptionsJSON(
                rp: .init(id: "localhost", name: "interop"),
                user: .init(id: Data("user".utf8).base64URLEncodedString(), name: "u", displayName: "u"),
                challenge: registrationChallenge
            )
            creation.attestation = attestation
            let request = PublicKeyCredentialRequestOptionsJSON(challenge: assertionChallenge, rpId: "localhost")
            (registration, assertion) = try enclave.run {
                let context = LAContext()
                try enclave.queue(.match)
                let registration = try authenticator.register(options: creation, deviceName: "test", context: context)
                let (assertion, _) = try authenticator.assert(
                    options: request,
                    binding: registration.binding,
                    context: context
                )
                return (registration, assertion.credential)
            }
        }

        func record(_ assertion: AuthenticationResponseJSON? = nil, attestationRoot: String? = nil) throws -> String {
            var object: [String: Any] = [
                "rpId": "localhost", "origin": origin,
                "registration": [
                    "challenge": registrationChallenge,
                    "credential": try JSONSerialization.jsonObject(
                        with: JSONEncoder().encode(registration!.request.credential)
                    ),
                ],
                "assertion": [
                    "challenge": assertionChallenge,
                    "credential": try JSONSerialization.jsonObject(
                        with: JSONEncoder().encode(assertion ?? self.assertion!)
                    ),
                ],
            ]
            if let attestationRoot { object["attestationRoot"] = attestationRoot }
            let path = enclave.directory + "/record-\(UUID().uuidString).json"
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    /// Our enclave-backed client's registration and assertion verify with py_webauthn; a tampered
    /// signature does not (so the check can fail).
    func testAnIndependentVerifierAcceptsOurClientsShapes() throws {
        let python = try python()
        let ceremony = try Ceremony(try TestEnclave())
        let verified = try runProcess(
            python,
            [interopDirectory + "/verify_with_py_webauthn.py", try ceremony.record()]
        )
        XCTAssertEqual(verified.status, 0, verified.stdout + verified.stderr)
        XCTAssertTrue(verified.stdout.contains("fmt=packed"), verified.stdout)
        XCTAssertTrue(verified.stdout.contains("assertion verified: new_sign_count=1 uv=True"), verified.stdout)

        var tampered = try XCTUnwrap(ceremony.assertion)
        var signature = try XCTUnwrap(Data(base64URLEncoded: tampered.response.signature))
        signature[signature.count - 1] ^= 0x01
        tampered.response.signature = signature.base64URLEncodedString()
        let refused = try runProcess(
            python,
            [interopDirectory + "/verify_with_py_webauthn.py", try ceremony.record(tampered)]
        )
        XCTAssertEqual(refused.status, 1, refused.stdout)
        XCTAssertTrue(refused.stdout.contains("REJECTED"), refused.stdout)
    }

    /// A registration with laenclaved's attestation (the server asked "direct") verifies with
    /// py_webauthn given this daemon's root — its chain, §8.2.1's certificate rules and the AAGUID
    /// extension checked by an independent implementation — and is refused under another root.
    func testAnIndependentVerifierTrustsOurAttestationUnderOurRootOnly() throws {
        let python = try python()
        let enclave = try TestEnclave()
        let other = try TestEnclave()
        let ceremony = try Ceremony(enclave, attestation: "direct")
        func root(_ daemon: TestEnclave) throws -> String {
            let printed = try runProcess(productPath("lactl"), ["attestation-root", "--socket", daemon.socketPath])
            XCTAssertEqual(printed.status, 0, printed.stderr)
            return printed.stdout
        }
        let trusted = try runProcess(
            python,
            [interopDirectory + "/verify_with_py_webauthn.py", try ceremony.record(attestationRoot: try root(enclave))]
        )
        XCTAssertEqual(trusted.status, 0, trusted.stdout + trusted.stderr)
        XCTAssertTrue(trusted.stdout.contains("fmt=packed"), trusted.stdout)
        XCTAssertTrue(trusted.stdout.contains("aaguid=df28713a-12ba-40ca-8003-eca26f10f554"), trusted.stdout)
        let untrusted = try runProcess(
            python,
            [interopDirectory + "/verify_with_py_webauthn.py", try ceremony.record(attestationRoot: try root(other))]
        )
        XCTAssertEqual(untrusted.status, 1, untrusted.stdout)
        XCTAssertTrue(untrusted.stdout.contains("REJECTED"), untrusted.stdout)
    }
}
