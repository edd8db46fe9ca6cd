import Crypto
import Foundation
import KeyAttestation
import TouchLoginAPI
import TouchLoginServer
import TouchLoginTestSupport
import WebAuthn
import X509
import XCTest

/// `--require-attestation`: a device key is bound only with laenclaved's attestation to a trusted
/// root, of the key being bound, stating a key that needs the user at every use.
final class AttestationTrustTests: XCTestCase {
    let machine = try! AttestationAuthority.create(label: "trusted machine", now: Date(timeIntervalSince1970: 1_700_000_000))
    static let fingerprintKey = KeyDescription(daemonMode: .system, sensor: .fprintd, simulationAllowed: false, keyKind: .signing,
                                               protection: .whenPasscodeSetThisDeviceOnly, accessControl: [.privateKeyUsage, .biometryCurrentSet])

    private func harness(forPasskeys: Bool = false, allowSimulation: Bool = false) async throws -> LoginServiceHarness {
        let root = machine.root
        return try await LoginServiceHarness { $0.attestation = AttestationTrust(roots: [root], forPasskeys: forPasskeys, allowSimulation: allowSimulation) }
    }

    /// A device key as `touchlogin` sends it: its certificate chain from `authority`, stating `description`.
    private func deviceKey(_ h: LoginServiceHarness, by authority: AttestationAuthority? = nil,
                           description: KeyDescription = fingerprintKey) throws -> SoftwareAuthenticator {
        var key = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
        key.aaguid = LaenclavedAttestation.aaguid
        key.certificates = try (authority ?? machine).chain(for: key.key.publicKey, as: description, now: Date(timeIntervalSince1970: h.clock.read()))
        return key
    }

    private func bind(_ h: LoginServiceHarness, _ key: SoftwareAuthenticator, kind: CredentialKind = .deviceKey) async -> String? {
        await LoginServiceHarness.code {
            let session = try await h.passwordLogin("alice", "correct horse")
            return try await h.bindPasskey(token: session.token, authenticator: key, kind: kind)
        }
    }

    func testAnAttestedDeviceKeyIsBoundAndShownAsAttested() async throws {
        let h = try await harness()
        let session = try await h.signUp("alice")
        let (s, account) = try await h.service.authenticate(bearer: session.token)
        let options = try await h.service.registrationOptions(session: s, account: account, RegistrationOptionsRequest(kind: .deviceKey))
        XCTAssertEqual(options.publicKey.attestation, "direct")
        let passkeyOptions = try await h.service.registrationOptions(session: s, account: account, RegistrationOptionsRequest())
        XCTAssertEqual(passkeyOptions.publicKey.attestation, "none")

        let bound = await bind(h, try deviceKey(h))
        XCTAssertNil(bound)
        let devices = try await h.service.devices(of: account)
        XCTAssertEqual(devices.map(\.attestedKey), [Self.fingerprintKey.summary])
    }

    /// The attack this closes: a stolen (fresh) session binds the attacker's software key as the
    /// victim's device key. Without an attestation requirement it is bound, as before.
    func testASoftwareKeyIsRefusedAsADeviceKey() async throws {
        let open = try await LoginServiceHarness()
        try await open.signUp("alice")
        let softwareBoundBefore = await bind(open, SoftwareAuthenticator(origin: LoginServiceHarness.origin))
        XCTAssertNil(softwareBoundBefore, "with no requirement, any key is bound")

        let h = try await harness()
        try await h.signUp("alice")
        for format in [AttestationFormat.packed, .none] {
            let code = await LoginServiceHarness.code {
                let session = try await h.passwordLogin("alice", "correct horse")
                let (s, account) = try await h.service.authenticate(bearer: session.token)
                let options = try await h.service.registrationOptions(session: s, account: account, RegistrationOptionsRequest(kind: .deviceKey))
                let key = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
                return try await h.service.register(session: s, account: account, RegistrationRequest(
                    deviceName: "x", kind: .deviceKey, credential: try key.registration(challenge: options.publicKey.challenge, format: format)), address: "192.0.2.1")
            }
            XCTAssertEqual(code, APIError.Code.attestationRequired.rawValue, "\(format)")
        }
        let (_, account) = try await h.service.authenticate(bearer: try await h.passwordLogin("alice", "correct horse").token)
        let devices = try await h.service.devices(of: account)
        XCTAssertEqual(devices.count, 0, "nothing was bound")
    }

    func testAChainFromAnotherRootIsRefused() async throws {
        let h = try await harness()
        try await h.signUp("alice")
        // The attacker's own authority, shaped exactly as laenclaved's, stating the best key.
        let forged = try AttestationAuthority.create(label: "trusted machine", now: Date(timeIntervalSince1970: 1_700_000_000))
        let code = await bind(h, try deviceKey(h, by: forged))
        XCTAssertEqual(code, APIError.Code.attestationUntrusted.rawValue)
    }

    func testAGenuineCertificateOfAnotherKeyDoesNotVouchForASoftwareKey() async throws {
        let h = try await harness()
        try await h.signUp("alice")
        // The attacker has a genuine laenclaved key (their own machine, trusted) and signs with it
        // a registration that carries their software key.
        let genuine = P256.Signing.PrivateKey()
        var key = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
        key.aaguid = LaenclavedAttestation.aaguid
        key.certificates = try machine.chain(for: genuine.publicKey, as: Self.fingerprintKey, now: Date(timeIntervalSince1970: h.clock.read()))
        key.attestationKey = genuine
        let code = await bind(h, key)
        XCTAssertEqual(code, APIError.Code.attestationUntrusted.rawValue)
    }

    func testAKeyUsableWithoutTheUserOrBehindSimulatedTouchesIsRefused() async throws {
        let h = try await harness()
        try await h.signUp("alice")
        var noUser = Self.fingerprintKey
        noUser.accessControl = [.privateKeyUsage]
        let noUserCode = await bind(h, try deviceKey(h, description: noUser))
        XCTAssertEqual(noUserCode, APIError.Code.attestationUntrusted.rawValue)
        var simulated = Self.fingerprintKey
        simulated.sensor = .simulated
        simulated.simulationAllowed = true
        let simulatedCode = await bind(h, try deviceKey(h, description: simulated))
        XCTAssertEqual(simulatedCode, APIError.Code.attestationUntrusted.rawValue)

        let demo = try await harness(allowSimulation: true)
        try await demo.signUp("alice")
        let demoCode = await bind(demo, try deviceKey(demo, description: simulated))
        XCTAssertNil(demoCode, "--attestation-allows-simulation accepts it")
    }

    func testPasskeysStayAllowedUnlessTheOperatorSaysOtherwise() async throws {
        let h = try await harness()
        try await h.signUp("alice")
        let passkey = await bind(h, SoftwareAuthenticator(origin: LoginServiceHarness.origin), kind: .passkey)
        XCTAssertNil(passkey)

        let strict = try await harness(forPasskeys: true)
        try await strict.signUp("alice")
        let refused = await bind(strict, SoftwareAuthenticator(origin: LoginServiceHarness.origin), kind: .passkey)
        XCTAssertEqual(refused, APIError.Code.attestationRequired.rawValue)
        let attested = await bind(strict, try deviceKey(strict), kind: .passkey)
        XCTAssertNil(attested)
    }

    func testARootsFileMayHoldSeveralRoots() throws {
        let other = try AttestationAuthority.create(label: "other", now: Date())
        let trust = try AttestationTrust(pem: try machine.rootPEM + other.rootPEM)
        XCTAssertEqual(trust.roots, [machine.root, other.root])
        XCTAssertThrowsError(try AttestationTrust(pem: "not a certificate"))
    }
}
