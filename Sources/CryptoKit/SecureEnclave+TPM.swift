import EnclaveProtocol
import Foundation

/// Our own (Apple has no such calls): on a daemon whose root is the machine's TPM 2.0, what a server
/// needs to believe a key lives in that TPM (issue 31, item 6) — the TPM's endorsement key and its
/// maker's certificate, the activation of a credential the server wrapped for them (which proves
/// the daemon's attestation key is in the same TPM), and the TPM's certify statement about a key.
/// Every call throws `SecureEnclaveKeyError.unavailable` on the software root.
extension SecureEnclave {
    /// The TPM's word for itself, as it marshals it.
    public struct TPMEndorsement: Sendable, Equatable {
        /// "ecc-p256" (the TCG's template L-2) or "ecc-p384" (H-3).
        public let template: String
        /// The endorsement key's TPMT_PUBLIC.
        public let endorsementKey: Data
        /// Its maker's certificate (DER), nil when the maker stored none in the TPM.
        public let endorsementCertificate: Data?
        /// The daemon's attestation key's TPMT_PUBLIC (restricted: it signs only what the TPM states).
        public let attestationKey: Data
    }

    public static func tpmEndorsement() throws -> TPMEndorsement {
        let reply = try EnclaveKey.run(
            KeyRequest(operation: .tpmEndorsement, kind: .signing, context: ""),
            context: nil
        )
        guard let tpm = reply.tpm else { throw SecureEnclaveKeyError.unavailable("the daemon returned no endorsement") }
        return TPMEndorsement(
            template: tpm.endorsementTemplate,
            endorsementKey: tpm.endorsementKey,
            endorsementCertificate: tpm.endorsementCertificate,
            attestationKey: tpm.attestationKey
        )
    }

    /// TPM2_ActivateCredential: the credential a server wrapped (TPM2_MakeCredential) for this
    /// TPM's endorsement key and the attestation key's name; fails for any other TPM or key.
    public static func activateTPMCredential(credentialBlob: Data, encryptedSecret: Data) throws -> Data {
        let reply = try EnclaveKey.run(
            KeyRequest(
                operation: .tpmActivateCredential,
                kind: .signing,
                tpmCredential: TPMCredentialValue(credentialBlob: credentialBlob, encryptedSecret: encryptedSecret),
                context: ""
            ),
            context: nil
        )
        guard let credential = reply.tpm?.credential else {
            throw SecureEnclaveKeyError.unavailable("the daemon returned no credential")
        }
        return credential
    }
}

extension SecureEnclave.P256.Signing.PrivateKey {
    /// The TPM's statement about this key, signed by the daemon's attestation key.
    public struct TPMCertification: Sendable, Equatable {
        /// The TPMS_ATTEST the TPM wrote (WebAuthn's `certInfo`).
        public let certifyInfo: Data
        /// The attestation key's ECDSA signature of it, DER (X9.62).
        public let signature: Data
        /// This key's TPMT_PUBLIC (WebAuthn's `pubArea`): its name is what the statement names.
        public let publicArea: Data
        /// The attestation key's TPMT_PUBLIC.
        public let attestationKey: Data
    }

    /// Our own: TPM2_Certify of this key (made inside the TPM) with `qualifyingData` (32 bytes:
    /// WebAuthn's SHA-256 of authenticator data and client data hash) bound in. Asks for no one;
    /// throws `keyInvalidated` for a key that can no longer be used, `unavailable` for a key made in
    /// the daemon (before the TPM root) or on the software root.
    public func tpmCertification(qualifyingData: Data) throws -> TPMCertification {
        let reply = try EnclaveKey.run(
            KeyRequest(
                operation: .tpmCertify,
                kind: .signing,
                blob: dataRepresentation,
                digest: qualifyingData,
                context: ""
            ),
            context: nil
        )
        guard let tpm = reply.tpm, let info = tpm.certifyInfo, let area = tpm.keyPublicArea,
            let signature = reply.signatureDER
        else { throw SecureEnclaveKeyError.unavailable("the daemon returned no certify statement") }
        return TPMCertification(
            certifyInfo: info,
            signature: signature,
            publicArea: area,
            attestationKey: tpm.attestationKey
        )
    }
}
