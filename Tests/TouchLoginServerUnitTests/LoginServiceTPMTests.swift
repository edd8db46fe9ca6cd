import Crypto
import Foundation
import TPMWire
import TouchLoginAPI
import TouchLoginTestSupport
import WebAuthn
import XCTest

@testable import TouchLoginServer

/// Registrations with a `tpm` statement (`LoginService+TPM`): the hardware root the server shows
/// and `--require-hardware-root`, with a stand-in TPM whose attestation key this server's CA
/// certified (`StandInTPM`).
final class LoginServiceTPMTests: XCTestCase {
    private func harness(requireHardwareRoot: Bool = false) async throws -> (LoginServiceHarness, StandInTPM) {
        let maker = StandInTPM(now: ManualClock().now)
        let root = try maker.makerRoot()
        let h = try await LoginServiceHarness {
            $0.tpmAttestation = TPMAttestationPolicy(makerRoots: [root], requireHardwareRoot: requireHardwareRoot)
        }
        return (h, maker)
    }

    /// A key registered with this stand-in TPM's statement, its aikCert from the server's own CA.
    private func tpmKey(_ h: LoginServiceHarness, _ tpm: StandInTPM) async throws -> SoftwareAuthenticator {
        var key = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
        let certificate = try await tpm.aikCertificate(from: try await h.service.tpmAuthority(), at: h.clock.now)
        key.tpm = (tpm.attestation, certificate)
        return key
    }

    private func bind(
        _ h: LoginServiceHarness,
        _ key: SoftwareAuthenticator,
        kind: CredentialKind?
    ) async throws -> Result<DeviceResponse?, APIError> {
        let session = try await h.passwordLogin("alice", "correct horse")
        do {
            _ = try await h.bindPasskey(token: session.token, authenticator: key, kind: kind)
            let (_, account) = try await h.service.authenticate(bearer: session.token)
            return .success(try await h.service.devices(of: account).first)
        } catch let error as APIError { return .failure(error) }
    }

    func testAKeyTheTPMMadeIsBoundAndShownWithItsTPM() async throws {
        let (h, tpm) = try await harness()
        try await h.signUp("alice")
        let device = try await bind(h, try await tpmKey(h, tpm), kind: .deviceKey).get()
        XCTAssertEqual(device?.attestationFormat, "tpm")
        XCTAssertEqual(device?.attestedKey, "TPM id:49424D00 swtpm")
    }

    /// Attack: TPM2_Certify states any loaded object, so a key made outside the TPM and loaded into
    /// it (TPM2_LoadExternal: no fixedTPM, fixedParent or sensitiveDataOrigin) gets a statement
    /// under a genuine attestation key; it is not a hardware root, and is refused.
    func testAKeyLoadedIntoTheTPMFromOutsideIsNotAHardwareRoot() async throws {
        let (h, tpm) = try await harness()
        try await h.signUp("alice")
        var loaded = try await tpmKey(h, tpm)
        loaded.tpmKeyAttributes = [.userWithAuth, .sign]
        guard case .failure(let error) = try await bind(h, loaded, kind: .deviceKey) else {
            return XCTFail("a key from outside the TPM was bound as a hardware root")
        }
        XCTAssertEqual(error.code, APIError.Code.attestationUntrusted.rawValue)
        XCTAssertTrue(error.message.contains("not made in it or can leave it"), error.message)
    }

    /// `--require-hardware-root` holds for every registration, whatever kind the client names (a
    /// passkey logs in as a device key does), and the options ask every kind for `tpm`.
    func testARequiredHardwareRootHoldsForEveryKind() async throws {
        let (h, tpm) = try await harness(requireHardwareRoot: true)
        try await h.signUp("alice")
        for kind in [CredentialKind.deviceKey, .passkey, nil] {
            let session = try await h.passwordLogin("alice", "correct horse")
            let (s, account) = try await h.service.authenticate(bearer: session.token)
            let options = try await h.service.registrationOptions(
                session: s,
                account: account,
                RegistrationOptionsRequest(kind: kind)
            )
            XCTAssertEqual(options.publicKey.attestation, "direct")
            XCTAssertEqual(options.publicKey.attestationFormats, ["tpm"])
            guard
                case .failure(let error) = try await bind(
                    h,
                    SoftwareAuthenticator(origin: LoginServiceHarness.origin),
                    kind: kind
                )
            else { return XCTFail("\(kind.map { "\($0)" } ?? "no kind"): bound without a TPM") }
            XCTAssertEqual(error.code, APIError.Code.attestationRequired.rawValue)
        }
        let device = try await bind(h, try await tpmKey(h, tpm), kind: nil).get()
        XCTAssertEqual(device?.attestedKey, "TPM id:49424D00 swtpm")
    }
}
