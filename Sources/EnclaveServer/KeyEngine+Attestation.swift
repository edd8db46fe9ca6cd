import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation

/// The TPM's attestation on a TPM root (issue 31, item 6): what the TPM says of itself and of its
/// keys, each a command sequence on the TPM's thread through the user's admission, as key uses are.
extension KeyEngine {
    /// The endorsement key (`TPMAttestationKeys.endorsement`) and the daemon's attestation key.
    func tpmEndorsement(_ keys: TPMAttestationKeys) async throws -> TPMAttestationValue {
        let (tcti, primary) = try tpmRoot()
        return try await onTPM("state its endorsement") {
            try Self.endorsement(keys, tcti: tcti, primary: primary).value
        }
    }

    /// The credential a server wrapped for this TPM's endorsement key and the attestation key.
    func tpmActivate(
        _ credential: TPMCredentialValue,
        _ keys: TPMAttestationKeys
    ) async throws
        -> TPMAttestationValue
    {
        let (tcti, primary) = try tpmRoot()
        return try await onTPM("activate the credential") {
            var (value, template, attestation) = try Self.endorsement(keys, tcti: tcti, primary: primary)
            value.credential = Data(
                try TPMDevice.activateCredential(
                    credentialBlob: Array(credential.credentialBlob),
                    encryptedSecret: Array(credential.encryptedSecret),
                    endorsement: template,
                    attestationKey: Array(attestation.blob),
                    auth: Array(attestation.auth),
                    tcti: tcti,
                    primary: primary
                )
            )
            return value
        }
    }

    /// The TPM's certify statement about `key` (a key the TPM holds), with `qualifyingData` bound
    /// in, and the attestation key's signature of it.
    func tpmCertify(
        _ key: KeyBlob,
        qualifyingData: Data,
        _ keys: TPMAttestationKeys
    ) async throws
        -> (value: TPMAttestationValue, signature: P256.Signing.ECDSASignature)
    {
        let (tcti, primary) = try tpmRoot()
        guard let held = key.tpm else {
            throw DaemonError(
                .keyNotAvailable,
                "this key was made in the daemon (before the TPM root), not in the TPM: the TPM can state nothing about it"
            )
        }
        let (value, raw) = try await onTPM("certify the key") {
            var (value, _, attestation) = try Self.endorsement(keys, tcti: tcti, primary: primary)
            let (statement, signature) = try TPMDevice.certify(
                key: Array(held.blob),
                keyAuth: Array(held.auth),
                attestationKey: Array(attestation.blob),
                attestationAuth: Array(attestation.auth),
                qualifyingData: Array(qualifyingData),
                tcti: tcti,
                primary: primary
            )
            value.certifyInfo = Data(statement)
            value.keyPublicArea = TPMDevice.publicArea(ofBlob: Array(held.blob)).map { Data($0) }
            return (value, signature)
        }
        return (value, try P256.Signing.ECDSASignature(rawRepresentation: raw))
    }

    private static func endorsement(
        _ keys: TPMAttestationKeys,
        tcti: String,
        primary: TPMPrimaryContext
    ) throws -> (value: TPMAttestationValue, template: TPMDevice.EndorsementTemplate, attestation: TPMKeyMaterial) {
        let attestation = try keys.key(tcti: tcti, primary: primary)
        let endorsement = try keys.endorsement(tcti: tcti)
        let value = TPMAttestationValue(
            endorsementTemplate: endorsement.template.wireName,
            endorsementKey: Data(endorsement.publicArea),
            endorsementCertificate: endorsement.certificate.map { Data($0) },
            attestationKey: attestation.publicKey
        )
        return (value, endorsement.template, attestation)
    }
}
