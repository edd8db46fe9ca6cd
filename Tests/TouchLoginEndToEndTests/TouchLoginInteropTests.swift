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
        guard let python = ProcessInfo.processInfo.environment["TOUCHLOGIN_INTEROP_PYTHON"], FileManager.default.isExecutableFile(atPath: python) else {
            throw XCTSkip("no interop Python: run through scripts/test, which makes it (scripts/setup-interop)")
        }
        return python
    }

    private var interopDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("interop").path
    }

    /// python-fido2's structures make the registrations (packed and none) and assertions; our server accepts them.
    func testTheServerAcceptsAnIndependentAuthenticator() throws {
        let python = try python()
        let server = try LoginServerProcess()
        let out = try runProcess(python, [interopDirectory + "/fido2_authenticator.py", server.baseURL, "pyuser"])
        XCTAssertEqual(out.status, 0, out.stdout + out.stderr)
        XCTAssertTrue(out.stdout.contains("interop: python-fido2 registrations and assertions accepted"), out.stdout)
    }

    /// Our enclave-backed client's registration and assertion verify with py_webauthn; a tampered
    /// signature does not (so the check can fail).
    func testAnIndependentVerifierAcceptsOurClientsShapes() throws {
        let python = try python()
        let enclave = try TestEnclave()
        let origin = "http://localhost:8080"
        let authenticator = EnclaveAuthenticator(origin: origin)
        let registrationChallenge = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64URLEncodedString()
        let assertionChallenge = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64URLEncodedString()
        let creation = PublicKeyCredentialCreationOptionsJSON(
            rp: .init(id: "localhost", name: "interop"), user: .init(id: Data("user".utf8).base64URLEncodedString(), name: "u", displayName: "u"),
            challenge: registrationChallenge)
        let request = PublicKeyCredentialRequestOptionsJSON(challenge: assertionChallenge, rpId: "localhost")
        let (registration, assertion): (EnclaveAuthenticator.Registration, AuthenticationResponseJSON) = try enclave.run {
            let context = LAContext()
            try enclave.queue(.match)
            let registration = try authenticator.register(options: creation, deviceName: "test", context: context)
            let (assertion, _) = try authenticator.assert(options: request, binding: registration.binding, context: context)
            return (registration, assertion.credential)
        }
        func record(_ assertion: AuthenticationResponseJSON) throws -> String {
            let object: [String: Any] = [
                "rpId": "localhost", "origin": origin,
                "registration": ["challenge": registrationChallenge, "credential": try JSONSerialization.jsonObject(with: JSONEncoder().encode(registration.request.credential))],
                "assertion": ["challenge": assertionChallenge, "credential": try JSONSerialization.jsonObject(with: JSONEncoder().encode(assertion))],
            ]
            let path = enclave.directory + "/record-\(UUID().uuidString).json"
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
            return path
        }
        let verified = try runProcess(python, [interopDirectory + "/verify_with_py_webauthn.py", try record(assertion)])
        XCTAssertEqual(verified.status, 0, verified.stdout + verified.stderr)
        XCTAssertTrue(verified.stdout.contains("fmt=packed"), verified.stdout)
        XCTAssertTrue(verified.stdout.contains("assertion verified: new_sign_count=1 uv=True"), verified.stdout)

        var tampered = assertion
        var signature = try XCTUnwrap(Data(base64URLEncoded: tampered.response.signature))
        signature[signature.count - 1] ^= 0x01
        tampered.response.signature = signature.base64URLEncodedString()
        let refused = try runProcess(python, [interopDirectory + "/verify_with_py_webauthn.py", try record(tampered)])
        XCTAssertEqual(refused.status, 1, refused.stdout)
        XCTAssertTrue(refused.stdout.contains("REJECTED"), refused.stdout)
    }

    /// A registration with laenclaved's attestation (the server asked "direct") verifies with
    /// py_webauthn given this daemon's root — its chain, §8.2.1's certificate rules and the AAGUID
    /// extension checked by an independent implementation — and is refused under another root.
    func testAnIndependentVerifierTrustsOurAttestationUnderOurRootOnly() throws {
        let python = try python()
        let enclave = try TestEnclave(), other = try TestEnclave()
        let origin = "http://localhost:8080"
        let authenticator = EnclaveAuthenticator(origin: origin)
        let registrationChallenge = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64URLEncodedString()
        let assertionChallenge = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64URLEncodedString()
        var creation = PublicKeyCredentialCreationOptionsJSON(
            rp: .init(id: "localhost", name: "interop"), user: .init(id: Data("user".utf8).base64URLEncodedString(), name: "u", displayName: "u"),
            challenge: registrationChallenge)
        creation.attestation = "direct"
        let request = PublicKeyCredentialRequestOptionsJSON(challenge: assertionChallenge, rpId: "localhost")
        let (registration, assertion): (EnclaveAuthenticator.Registration, AuthenticationResponseJSON) = try enclave.run {
            let context = LAContext()
            try enclave.queue(.match)
            let registration = try authenticator.register(options: creation, deviceName: "test", context: context)
            let (assertion, _) = try authenticator.assert(options: request, binding: registration.binding, context: context)
            return (registration, assertion.credential)
        }
        func root(_ daemon: TestEnclave) throws -> String {
            let printed = try runProcess(productPath("lactl"), ["attestation-root", "--socket", daemon.socketPath])
            XCTAssertEqual(printed.status, 0, printed.stderr)
            return printed.stdout
        }
        func verify(under root: String) throws -> ProcessOutput {
            let object: [String: Any] = [
                "rpId": "localhost", "origin": origin, "attestationRoot": root,
                "registration": ["challenge": registrationChallenge, "credential": try JSONSerialization.jsonObject(with: JSONEncoder().encode(registration.request.credential))],
                "assertion": ["challenge": assertionChallenge, "credential": try JSONSerialization.jsonObject(with: JSONEncoder().encode(assertion))],
            ]
            let path = enclave.directory + "/record-\(UUID().uuidString).json"
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
            return try runProcess(python, [interopDirectory + "/verify_with_py_webauthn.py", path])
        }
        let trusted = try verify(under: try root(enclave))
        XCTAssertEqual(trusted.status, 0, trusted.stdout + trusted.stderr)
        XCTAssertTrue(trusted.stdout.contains("fmt=packed"), trusted.stdout)
        XCTAssertTrue(trusted.stdout.contains("aaguid=df28713a-12ba-40ca-8003-eca26f10f554"), trusted.stdout)
        let untrusted = try verify(under: try root(other))
        XCTAssertEqual(untrusted.status, 1, untrusted.stdout)
        XCTAssertTrue(untrusted.stdout.contains("REJECTED"), untrusted.stdout)
    }
}
