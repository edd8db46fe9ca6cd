import Crypto
import Foundation
import IntegrationSupport
import SwiftASN1
import TPMWire
import X509
import XCTest

@testable import EnclaveServer

/// The TPM's side of attestation (issue 31, item 6), against swtpm manufactured by `swtpm_setup`
/// with an endorsement certificate from a local CA (as a TPM maker's, in tests): the certificate
/// read from the TPM's NV names the key the TPM derives from the TCG template and chains to the
/// CA; a credential wrapped where there is no TPM (`TPMCredential.make`, a server's part) comes back
/// only through this TPM and this attestation key; and the TPM's certify statement names a key it
/// holds, with the caller's data, signed by the attestation key.
final class TPMDeviceAttestationTests: XCTestCase {
    private var tpm: SwtpmSimulator!
    private let primary = TPMPrimaryContext()
    private let akAuth = (0..<32).map { UInt8(0x5A ^ $0) }

    override func setUpWithError() throws {
        guard SwtpmSimulator.available, SwtpmSimulator.manufacturable else {
            throw XCTSkip("needs swtpm and swtpm_setup (scripts/setup-debian installs them)")
        }
        tpm = try SwtpmSimulator(endorsed: true)
    }

    override func tearDown() {
        tpm?.destroy()
        tpm = nil
    }

    private func pemCertificate(_ path: String) throws -> Certificate {
        try Certificate(pemEncoded: String(contentsOfFile: path, encoding: .utf8))
    }

    func testTheEndorsementCertificateNamesTheKeyTheTPMDerivesAndChainsToItsMaker() throws {
        let der = try TPMDevice.endorsementCertificate(.eccP384, tcti: tpm.tcti)
        let certificate = try Certificate(derEncoded: der)
        let endorsement = try TPMPublicArea(try TPMDevice.endorsementKey(.eccP384, tcti: tpm.tcti))
        XCTAssertEqual(endorsement.curve, .p384)
        XCTAssertTrue(endorsement.attributes.isSuperset(of: [.fixedTPM, .restricted, .decrypt]))
        XCTAssertEqual(
            Array(P384.Signing.PublicKey(certificate.publicKey)?.x963Representation ?? Data()),
            endorsement.x963,
            "the certified key is the one the TPM derives from the template"
        )
        // The maker's chain: the EK certificate under the local CA's issuing certificate, under its root.
        let issuer = try pemCertificate(try XCTUnwrap(tpm.endorsementIssuer))
        let root = try pemCertificate(try XCTUnwrap(tpm.endorsementRoot))
        XCTAssertTrue(issuer.publicKey.isValidSignature(certificate.signature, for: certificate))
        XCTAssertTrue(root.publicKey.isValidSignature(issuer.signature, for: issuer))
        XCTAssertFalse(root.publicKey.isValidSignature(certificate.signature, for: certificate))
        // The P-256 template's key exists too (real TPMs certify it more often), and it is another key.
        let p256 = try TPMPublicArea(try TPMDevice.endorsementKey(.eccP256, tcti: tpm.tcti))
        XCTAssertEqual(p256.curve, .p256)
        // No P-256 certificate in this TPM: said as missing, not as a failure of the TPM.
        XCTAssertThrowsError(try TPMDevice.endorsementCertificate(.eccP256, tcti: tpm.tcti)) {
            XCTAssertTrue(($0 as? DaemonError)?.tpmObjectMissing == true, "\($0)")
        }
    }

    /// Attack first: a credential the server wrapped for this TPM's endorsement key and one
    /// attestation key's name, presented by another TPM, or with another attestation key on this
    /// TPM, or tampered with, gives nothing.
    func testACredentialWrappedForThisTPMComesBackOnlyThroughItsAttestationKey() throws {
        let ak = try TPMDevice.createAttestationKey(auth: akAuth, tcti: tpm.tcti, primary: primary)
        let akPublic = try TPMPublicArea(try XCTUnwrap(TPMDevice.publicArea(ofBlob: ak)))
        XCTAssertTrue(akPublic.attributes.isSuperset(of: [.restricted, .sign, .fixedTPM, .sensitiveDataOrigin]))
        for template in TPMDevice.EndorsementTemplate.allCases {
            let endorsement = try TPMPublicArea(try TPMDevice.endorsementKey(template, tcti: tpm.tcti))
            let credential = Array(SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })
            let wrapped = try TPMCredential.make(credential, endorsementKey: endorsement, objectName: akPublic.name)
            let activated = try TPMDevice.activateCredential(
                credentialBlob: wrapped.credentialBlob,
                encryptedSecret: wrapped.encryptedSecret,
                endorsement: template,
                attestationKey: ak,
                auth: akAuth,
                tcti: tpm.tcti,
                primary: primary
            )
            XCTAssertEqual(activated, credential, "\(template)")

            // Another attestation key of this TPM: the name bound into the credential differs.
            let other = try TPMDevice.createAttestationKey(auth: akAuth, tcti: tpm.tcti, primary: primary)
            XCTAssertThrowsError(
                try TPMDevice.activateCredential(
                    credentialBlob: wrapped.credentialBlob,
                    encryptedSecret: wrapped.encryptedSecret,
                    endorsement: template,
                    attestationKey: other,
                    auth: akAuth,
                    tcti: tpm.tcti,
                    primary: primary
                ),
                "another attestation key took the credential"
            ) { XCTAssertTrue(($0 as? DaemonError)?.tpmIntegrityFailed == true, "\($0)") }
            // Tampered: one byte of the encrypted credential flipped.
            var tampered = wrapped.credentialBlob
            tampered[tampered.count - 1] ^= 1
            XCTAssertThrowsError(
                try TPMDevice.activateCredential(
                    credentialBlob: tampered,
                    encryptedSecret: wrapped.encryptedSecret,
                    endorsement: template,
                    attestationKey: ak,
                    auth: akAuth,
                    tcti: tpm.tcti,
                    primary: primary
                ),
                "a tampered credential was taken"
            ) { XCTAssertTrue(($0 as? DaemonError)?.tpmIntegrityFailed == true, "\($0)") }
        }

        // Another TPM, with its own attestation key, given the credential wrapped for this one.
        let elsewhere = try SwtpmSimulator()
        defer { elsewhere.destroy() }
        let elsewherePrimary = TPMPrimaryContext()
        let theirs = try TPMDevice.createAttestationKey(auth: akAuth, tcti: elsewhere.tcti, primary: elsewherePrimary)
        let theirName = try TPMPublicArea(try XCTUnwrap(TPMDevice.publicArea(ofBlob: theirs))).name
        let ours = try TPMPublicArea(try TPMDevice.endorsementKey(.eccP256, tcti: tpm.tcti))
        let wrapped = try TPMCredential.make([1, 2, 3, 4], endorsementKey: ours, objectName: theirName)
        XCTAssertThrowsError(
            try TPMDevice.activateCredential(
                credentialBlob: wrapped.credentialBlob,
                encryptedSecret: wrapped.encryptedSecret,
                endorsement: .eccP256,
                attestationKey: theirs,
                auth: akAuth,
                tcti: elsewhere.tcti,
                primary: elsewherePrimary
            ),
            "another TPM opened a credential wrapped for this one"
        ) { XCTAssertTrue(($0 as? DaemonError)?.tpmIntegrityFailed == true, "\($0)") }
    }

    func testTheTPMCertifiesItsOwnKeyWithTheCallersDataUnderTheAttestationKey() throws {
        let ak = try TPMDevice.createAttestationKey(auth: akAuth, tcti: tpm.tcti, primary: primary)
        let akPublic = try TPMPublicArea(try XCTUnwrap(TPMDevice.publicArea(ofBlob: ak)))
        let keyAuth = (0..<32).map { UInt8($0) }
        let key = try TPMDevice.createKey(
            signing: true,
            agreement: false,
            auth: keyAuth,
            tcti: tpm.tcti,
            primary: primary
        )
        let keyPublic = try TPMPublicArea(try XCTUnwrap(TPMDevice.publicArea(ofBlob: key.blob)))
        XCTAssertEqual(keyPublic.x963, key.publicKey)
        let challenge = Array(SHA256.hash(data: Data("authenticator data and client data".utf8)))
        let (bytes, signature) = try TPMDevice.certify(
            key: key.blob,
            keyAuth: keyAuth,
            attestationKey: ak,
            attestationAuth: akAuth,
            qualifyingData: challenge,
            tcti: tpm.tcti,
            primary: primary
        )
        let statement = try TPMCertifyStatement(bytes)
        XCTAssertEqual(statement.extraData, challenge)
        XCTAssertEqual(statement.certifiedName, keyPublic.name, "the statement names the key")
        let verifying = try P256.Signing.PublicKey(x963Representation: akPublic.x963)
        let ecdsa = try P256.Signing.ECDSASignature(rawRepresentation: signature)
        XCTAssertTrue(verifying.isValidSignature(ecdsa, for: SHA256.hash(data: bytes)))
        var forged = bytes
        forged[forged.count - 1] ^= 1
        XCTAssertFalse(verifying.isValidSignature(ecdsa, for: SHA256.hash(data: forged)))

        // The wrong auth value for the key: the TPM certifies nothing.
        XCTAssertThrowsError(
            try TPMDevice.certify(
                key: key.blob,
                keyAuth: Array(keyAuth.reversed()),
                attestationKey: ak,
                attestationAuth: akAuth,
                qualifyingData: challenge,
                tcti: tpm.tcti,
                primary: primary
            )
        ) { XCTAssertTrue(($0 as? DaemonError)?.tpmAuthorizationFailed == true, "\($0)") }
    }
}
