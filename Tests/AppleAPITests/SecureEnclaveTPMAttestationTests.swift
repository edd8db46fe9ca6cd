import CryptoKit
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import TPMWire
import X509
import XCTest

/// The TPM root's attestation through the client API (issue 31, item 6), against a daemon sealed
/// to a swtpm that `swtpm_setup` endorsed with a local CA's certificate: the endorsement names a
/// key the CA certified and a restricted attestation key; a credential a server wraps for them
/// (`TPMCredential.make`) comes back through the daemon, and a tampered one does not; the TPM's
/// certify statement names the app's key, binds the data, and verifies under the attestation key.
/// A blob that is not the app's key is not certified (the look-up a signature's uses: another app's
/// key is refused there, `KeyBlob`'s binding to user and app), and a software-root daemon attests
/// nothing.
final class SecureEnclaveTPMAttestationTests: XCTestCase {
    private var tpm: SwtpmSimulator!
    private var enclave: TestEnclave!

    override func setUpWithError() throws {
        guard SwtpmSimulator.available, SwtpmSimulator.manufacturable else {
            throw XCTSkip("needs swtpm and swtpm_setup (scripts/setup-debian installs them)")
        }
        tpm = try SwtpmSimulator(endorsed: true)
        enclave = try TestEnclave.sealed(to: tpm)
    }

    override func tearDown() {
        enclave?.stop()
        enclave = nil
        tpm?.destroy()
        tpm = nil
    }

    func testTheEndorsementAndACredentialRoundTripProveTheAttestationKeysTPM() throws {
        try enclave.run {
            let endorsement = try SecureEnclave.tpmEndorsement()
            XCTAssertEqual(endorsement.template, "ecc-p384", "swtpm's maker certified its P-384 key")
            let certificate = try Certificate(derEncoded: Array(try XCTUnwrap(endorsement.endorsementCertificate)))
            let issuer = try Certificate(
                pemEncoded: String(contentsOfFile: try XCTUnwrap(tpm.endorsementIssuer), encoding: .utf8)
            )
            XCTAssertTrue(issuer.publicKey.isValidSignature(certificate.signature, for: certificate))
            let endorsementKey = try TPMPublicArea(endorsement.endorsementKey)
            XCTAssertEqual(
                P384.Signing.PublicKey(certificate.publicKey).map { Array($0.x963Representation) },
                endorsementKey.x963
            )
            let attestationKey = try TPMPublicArea(endorsement.attestationKey)
            XCTAssertTrue(attestationKey.attributes.isSuperset(of: [.restricted, .sign, .fixedTPM]))
            XCTAssertEqual(try SecureEnclave.tpmEndorsement(), endorsement, "one attestation key, kept")

            let secret = Array(Data((0..<32).map { UInt8($0 * 7 & 0xFF) }))
            let wrapped = try TPMCredential.make(
                secret,
                endorsementKey: endorsementKey,
                objectName: attestationKey.name
            )
            let activated = try SecureEnclave.activateTPMCredential(
                credentialBlob: Data(wrapped.credentialBlob),
                encryptedSecret: Data(wrapped.encryptedSecret)
            )
            XCTAssertEqual(Array(activated), secret)
            var tampered = wrapped.credentialBlob
            tampered[tampered.count - 1] ^= 1
            XCTAssertThrowsError(
                try SecureEnclave.activateTPMCredential(
                    credentialBlob: Data(tampered),
                    encryptedSecret: Data(wrapped.encryptedSecret)
                )
            ) {
                guard case .unavailable(let message)? = $0 as? SecureEnclaveKeyError else { return XCTFail("\($0)") }
                XCTAssertTrue(message.contains("integrity"), message)
            }
            XCTAssertThrowsError(
                try SecureEnclave.activateTPMCredential(credentialBlob: Data(), encryptedSecret: Data([1]))
            ) {
                XCTAssertEqual(
                    $0 as? SecureEnclaveKeyError,
                    .invalidParameter(
                        "tpmActivateCredential needs a credential blob and an encrypted secret of 1…1024 bytes each"
                    )
                )
            }
        }
        // The attestation key outlives the daemon: the same after a restart.
        let before = try enclave.run { try SecureEnclave.tpmEndorsement() }
        try enclave.restart()
        XCTAssertEqual(try enclave.run { try SecureEnclave.tpmEndorsement() }, before)
    }

    func testTheTPMCertifiesTheAppsKeyWithItsDataUnderTheAttestationKey() throws {
        try enclave.run {
            let key = try SecureEnclave.P256.Signing.PrivateKey()
            let data = Data(SHA256.hash(data: Data("authenticator data ‖ client data hash".utf8)))
            let certification = try key.tpmCertification(qualifyingData: data)
            let statement = try TPMCertifyStatement(certification.certifyInfo)
            let area = try TPMPublicArea(certification.publicArea)
            XCTAssertEqual(Data(area.x963), key.publicKey.x963Representation, "the statement's key is this key")
            XCTAssertEqual(statement.certifiedName, area.name)
            XCTAssertEqual(Data(statement.extraData), data)
            let attestationKey = try P256.Signing.PublicKey(
                x963Representation: try TPMPublicArea(certification.attestationKey).x963
            )
            let signature = try P256.Signing.ECDSASignature(derRepresentation: certification.signature)
            XCTAssertTrue(attestationKey.isValidSignature(signature, for: SHA256.hash(data: certification.certifyInfo)))
            XCTAssertEqual(
                certification.attestationKey,
                try SecureEnclave.tpmEndorsement().attestationKey,
                "signed by the attestation key the endorsement names"
            )
            XCTAssertThrowsError(try key.tpmCertification(qualifyingData: Data([1, 2, 3]))) {
                guard case .invalidParameter? = $0 as? SecureEnclaveKeyError else { return XCTFail("\($0)") }
            }
            // A blob that is not this app's key, sent past the client's own look-up: refused as
            // every use of a key that is not the app's.
            var forged = key.dataRepresentation
            forged[forged.count - 1] ^= 1
            let certify = KeyRequest(operation: .tpmCertify, kind: .signing, blob: forged, digest: data, context: "u")
            guard case .key(let refused) = try enclave.send(.key(certify)) else { return XCTFail("no key reply") }
            XCTAssertEqual(refused.problem, .invalidKey, refused.message ?? "")
            XCTAssertNil(refused.tpm)
        }
    }

    func testASoftwareRootDaemonAttestsNothing() throws {
        let software = try TestEnclave()
        defer { software.stop() }
        try software.run {
            XCTAssertThrowsError(try SecureEnclave.tpmEndorsement()) {
                guard case .unavailable(let message)? = $0 as? SecureEnclaveKeyError else { return XCTFail("\($0)") }
                XCTAssertTrue(message.contains("software root"), message)
            }
            let key = try SecureEnclave.P256.Signing.PrivateKey()
            XCTAssertThrowsError(try key.tpmCertification(qualifyingData: Data(count: 32))) {
                guard case .unavailable(let message)? = $0 as? SecureEnclaveKeyError else { return XCTFail("\($0)") }
                XCTAssertTrue(message.contains("software root"), message)
            }
        }
    }
}
