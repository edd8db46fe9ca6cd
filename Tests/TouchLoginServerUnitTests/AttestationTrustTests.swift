import Crypto
import Foundation
import KeyAttestation
import TouchLoginAPI
import TouchLoginServer
import TouchLoginTestSupport
import WebAuthn
import X509
import XCTest

/// `--require-attestation`: a credential is bound only with a system laenclaved's attestation to a
/// trusted root, of the key being bound, stating a key that needs the user.
final class AttestationTrustTests: XCTestCase {
    let machine = try! AttestationAuthority.create(daemonMode: .system)
    static let fingerprintKey = KeyDescription(
        daemonMode: .system,
        sensor: .fprintd,
        simulationAllowed: false,
        keyKind: .signing,
        protection: .whenPasscodeSetThisDeviceOnly,
        accessControl: [.privateKeyUsage, .biometryCurrentSet]
    )

    private func harness(
        allowUnattestedPasskeys: Bool = false,
        allowUserDaemons: Bool = false,
        allowSimulation: Bool = false
    ) async throws -> LoginServiceHarness {
        let root = machine.root
        return try await LoginServiceHarness {
            $0.attestation = AttestationTrust(
                roots: [root],
                allowUnattestedPasskeys: allowUnattestedPasskeys,
                allowUserDaemons: allowUserDaemons,
                allowSimulation: allowSimulation
            )
        }
    }

    /// A device key as `touchlogin` sends it: its certificate chain from `authority`, stating `description`.
    private func deviceKey(
        _ h: LoginServiceHarness,
        by authority: AttestationAuthority? = nil,
        description: KeyDescription = fingerprintKey
    ) throws -> SoftwareAuthenticator {
        var key = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
        key.aaguid = LaenclavedAttestation.aaguid
        key.certificates = try (authority ?? machine).chain(for: key.key.publicKey, as: description)
        return key
    }

    /// Binds `key` in a fresh password session: nil, or the refusal's code and message.
    private func bind(
        _ h: LoginServiceHarness,
        _ key: SoftwareAuthenticator,
        kind: CredentialKind? = .deviceKey
    ) async -> String? {
        do {
            let session = try await h.passwordLogin("alice", "correct horse")
            _ = try await h.bindPasskey(token: session.token, authenticator: key, kind: kind)
            return nil
        } catch let e as APIError { return "\(e.code): \(e.message)" } catch { return "\(error)" }
    }

    private func refused(
        _ outcome: String?,
        _ code: APIError.Code,
        _ reason: String,
        file: StaticString = #filePath,
        line: UInt = #line
    ) {
        XCTAssertTrue(
            outcome?.hasPrefix(code.rawValue + ":") == true && outcome?.contains(reason) == true,
            outcome ?? "bound",
            file: file,
            line: line
        )
    }

    func testAnAttestedDeviceKeyIsBoundAndShownAsAttested() async throws {
        let h = try await harness()
        let session = try await h.signUp("alice")
        let (s, account) = try await h.service.authenticate(bearer: session.token)
        for kind in [CredentialKind.deviceKey, .passkey, nil] {
            let options = try await h.service.registrationOptions(
                session: s,
                account: account,
                RegistrationOptionsRequest(kind: kind)
            )
            XCTAssertEqual(options.publicKey.attestation, "direct", "\(String(describing: kind))")
        }

        let bound = await bind(h, try deviceKey(h))
        XCTAssertNil(bound)
        let devices = try await h.service.devices(of: account)
        // As openssl names the root's key (SHA-256 of its SubjectPublicKeyInfo), computed apart.
        let fingerprint = SHA256.hash(
            data: try XCTUnwrap(P256.Signing.PublicKey(machine.root.publicKey)).derRepresentation
        ).map { String(format: "%02x", $0) }.joined()
        XCTAssertEqual(
            devices.map(\.attestedKey),
            ["system daemon, fprintd, biometryCurrentSet,privateKeyUsage (akpu); root \(fingerprint.prefix(16))"]
        )
    }

    /// The attack this closes: a session with the password typed (phished, or a stolen session
    /// within its step-up window) binds the attacker's software key, which then logs in as the
    /// victim for good. Without an attestation requirement it is bound, as before.
    func testASoftwareKeyIsRefused() async throws {
        let open = try await LoginServiceHarness()
        try await open.signUp("alice")
        let softwareBoundBefore = await bind(open, SoftwareAuthenticator(origin: LoginServiceHarness.origin))
        XCTAssertNil(softwareBoundBefore, "with no requirement, any key is bound")

        let h = try await harness()
        try await h.signUp("alice")
        for format in [AttestationFormat.packed, .none] {
            for kind in [CredentialKind.deviceKey, .passkey, nil] {
                let code = await LoginServiceHarness.code {
                    let session = try await h.passwordLogin("alice", "correct horse")
                    let (s, account) = try await h.service.authenticate(bearer: session.token)
                    let options = try await h.service.registrationOptions(
                        session: s,
                        account: account,
                        RegistrationOptionsRequest(kind: kind)
                    )
                    let key = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
                    return try await h.service.register(
                        session: s,
                        account: account,
                        RegistrationRequest(
                            deviceName: "x",
                            kind: kind,
                            credential: try key.registration(challenge: options.publicKey.challenge, format: format)
                        ),
                        address: "192.0.2.1"
                    )
                }
                XCTAssertEqual(
                    code,
                    APIError.Code.attestationRequired.rawValue,
                    "\(format), \(String(describing: kind)): whatever the client calls it"
                )
            }
        }
        let (_, account) = try await h.service.authenticate(
            bearer: try await h.passwordLogin("alice", "correct horse").token
        )
        let devices = try await h.service.devices(of: account)
        XCTAssertEqual(devices.count, 0, "nothing was bound")
    }

    func testAChainFromAnotherRootIsRefused() async throws {
        let h = try await harness()
        try await h.signUp("alice")
        // The attacker's own authority, shaped exactly as laenclaved's, stating the best key.
        let forged = try AttestationAuthority.create(daemonMode: .system)
        refused(
            await bind(h, try deviceKey(h, by: forged)),
            .attestationUntrusted,
            "does not chain to an attestation root this server trusts"
        )
    }

    func testAGenuineCertificateOfAnotherKeyDoesNotVouchForASoftwareKey() async throws {
        let h = try await harness()
        try await h.signUp("alice")
        // The attacker has a genuine laenclaved key (their own machine, trusted) and signs with it
        // a registration that carries their software key.
        let genuine = P256.Signing.PrivateKey()
        var key = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
        key.aaguid = LaenclavedAttestation.aaguid
        key.certificates = try machine.chain(for: genuine.publicKey, as: Self.fingerprintKey)
        key.attestationKey = genuine
        refused(await bind(h, key), .attestationUntrusted, "certifies another key")
    }

    func testAKeyUsableWithoutTheUserOrBehindSimulatedTouchesIsRefused() async throws {
        let h = try await harness()
        try await h.signUp("alice")
        var noUser = Self.fingerprintKey
        noUser.accessControl = [.privateKeyUsage]
        refused(
            await bind(h, try deviceKey(h, description: noUser)),
            .attestationUntrusted,
            "can be used without the user"
        )
        var simulated = Self.fingerprintKey
        simulated.sensor = .simulated
        simulated.simulationAllowed = true
        refused(
            await bind(h, try deviceKey(h, description: simulated)),
            .attestationUntrusted,
            "accepts simulated touches"
        )

        let demo = try await harness(allowSimulation: true)
        try await demo.signUp("alice")
        let demoCode = await bind(demo, try deviceKey(demo, description: simulated))
        XCTAssertNil(demoCode, "--attestation-allows-simulation accepts it")
    }

    /// Attack: a laenclaved chain of a key (public: it went to every server the key was bound to)
    /// beside a `tpm` statement made with an attestation key of the attacker's own. The statement
    /// verifies as a statement; only a server that checks its aikCert binds the key to this
    /// registration. A server that does not check tpm statements refuses the pair, and one that
    /// does refuses an aikCert it did not issue.
    func testALaenclavedChainBesideAnUncheckedTPMStatementBindsNothing() async throws {
        let root = machine.root
        for (makers, reason) in [
            ([Certificate](), "does not check tpm attestations"),
            ([root], "not issued by this server's TPM attestation-key CA"),
        ] {
            let h = try await LoginServiceHarness {
                $0.attestation = AttestationTrust(roots: [root])
                if !makers.isEmpty { $0.tpmAttestation = TPMAttestationPolicy(makerRoots: makers) }
            }
            try await h.signUp("alice")
            var forged = try deviceKey(h)
            let attackers = P256.Signing.PrivateKey()
            forged.tpm = (attackers, try SoftwareAuthenticator.aikCertificate(for: attackers))
            refused(await bind(h, forged), .attestationUntrusted, reason)
        }
    }

    /// A user-mode daemon's attestation key is a file its user (and whatever runs as that user)
    /// can read: what its leaves say is that user's word, and it cannot pass for a system daemon's.
    func testAUserModeDaemonsAttestationIsTheUsersWord() async throws {
        let userMachine = try AttestationAuthority.create(daemonMode: .user)
        let root = userMachine.root
        var userKey = Self.fingerprintKey
        userKey.daemonMode = .user
        for allowUserDaemons in [false, true] {
            let h = try await LoginServiceHarness {
                $0.attestation = AttestationTrust(roots: [root], allowUserDaemons: allowUserDaemons)
            }
            try await h.signUp("alice")
            // Whoever holds the user's attestation key writes a leaf that claims a system daemon.
            refused(
                await bind(h, try deviceKey(h, by: userMachine)),
                .attestationUntrusted,
                "its attestation key is a user daemon's"
            )
            let honest = await bind(h, try deviceKey(h, by: userMachine, description: userKey))
            if allowUserDaemons {
                XCTAssertNil(honest)
            } else {
                refused(honest, .attestationUntrusted, "user-mode daemon")
            }
        }
    }

    /// `--allow-unattested-passkeys`: what says it is a passkey passes unattested (the client's
    /// word: the option's honest limit), what says it is a device key still needs the attestation,
    /// and only attested keys are shown as attested.
    func testUnattestedPasskeysOnlyWhenTheOperatorSaysSo() async throws {
        let h = try await harness(allowUnattestedPasskeys: true)
        try await h.signUp("alice")
        let passkey = await bind(h, SoftwareAuthenticator(origin: LoginServiceHarness.origin), kind: .passkey)
        XCTAssertNil(passkey)
        refused(
            await bind(h, SoftwareAuthenticator(origin: LoginServiceHarness.origin), kind: .deviceKey),
            .attestationRequired,
            "no certificate chain"
        )
        let (s, account) = try await h.service.authenticate(
            bearer: try await h.passwordLogin("alice", "correct horse").token
        )
        let options = try await h.service.registrationOptions(
            session: s,
            account: account,
            RegistrationOptionsRequest(kind: .passkey)
        )
        XCTAssertEqual(options.publicKey.attestation, "none")
        let devices = try await h.service.devices(of: account)
        XCTAssertEqual(devices.map(\.attestedKey), [nil])
    }

    func testTheIssuerAndTheVerifierNameTheSameFIDOExtensionAndUnit() {
        XCTAssertEqual(AttestationObject.fidoAAGUIDExtension, LaenclavedAttestation.fidoAAGUIDExtensionID)
        XCTAssertEqual(AttestationObject.attestationUnit, LaenclavedAttestation.attestationUnit)
    }

    func testARootsFileMayHoldSeveralRoots() throws {
        let other = try AttestationAuthority.create(daemonMode: .system)
        // As an administrator gathers them: `lactl attestation-root` output, one after another.
        let trust = try AttestationTrust(
            pem: "laenclaved attestation root of a, system daemon\n" + (try machine.rootPEM) + "\n"
                + "laenclaved attestation root of b, system daemon\n" + (try other.rootPEM)
        )
        XCTAssertEqual(trust.roots, [machine.root, other.root])
        XCTAssertThrowsError(try AttestationTrust(pem: "not a certificate"))
    }
}
