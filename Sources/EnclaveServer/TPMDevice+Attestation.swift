import CTPM

/// What a server needs to believe a key lives in this TPM (issue 31, item 6): the endorsement key
/// and the certificate its maker stored in the TPM's NV, an attestation key that signs only what
/// the TPM itself states, the activation of a credential a server wrapped for the endorsement key
/// (which proves the attestation key is in the same TPM), and TPM2_Certify of a key.
extension TPMDevice {
    /// The endorsement key templates of the TCG's EK Credential Profile this code takes, and where
    /// the TPM's maker keeps each one's certificate.
    public enum EndorsementTemplate: Sendable, CaseIterable {
        /// L-2: ECC NIST P-256, authorized by the endorsement hierarchy's policy.
        case eccP256
        /// H-3: ECC NIST P-384, the high range's (swtpm's `--ecc`).
        case eccP384

        public var certificateIndex: UInt32 {
            switch self {
            case .eccP256: 0x01C0_000A
            case .eccP384: 0x01C0_0016
            }
        }

        var isP384: Int32 { self == .eccP384 ? 1 : 0 }

        /// As `TPMAttestationValue.endorsementTemplate` says it.
        public var wireName: String { self == .eccP384 ? "ecc-p384" : "ecc-p256" }
    }

    /// The endorsement key's certificate (DER) from the TPM's NV; `tpmObjectMissing` when the maker put none.
    public static func endorsementCertificate(
        _ template: EndorsementTemplate,
        tcti: String
    ) throws(DaemonError) -> [UInt8] {
        try withTPM(tcti) { tpm throws(DaemonError) in
            var bytes = [UInt8](repeating: 0, count: 4096)
            var size = bytes.count
            let rc = la_tpm_nv_read(tpm, template.certificateIndex, &bytes, &size)
            guard rc == 0 else { throw DaemonError.tpm("reading the endorsement certificate", rc) }
            return Array(bytes[..<size])
        }
    }

    /// The endorsement key's public area (TPMT_PUBLIC), derived from its template.
    public static func endorsementKey(_ template: EndorsementTemplate, tcti: String) throws(DaemonError) -> [UInt8] {
        try withTPM(tcti) { tpm throws(DaemonError) in
            var bytes = [UInt8](repeating: 0, count: 1024)
            var size = bytes.count
            let rc = la_tpm_ek_public(tpm, template.isP384, &bytes, &size)
            guard rc == 0 else { throw DaemonError.tpm("deriving the endorsement key", rc) }
            return Array(bytes[..<size])
        }
    }

    /// A new attestation key (restricted, ECDSA P-256 with SHA-256) under the storage primary,
    /// usable only with `auth`: its blob.
    public static func createAttestationKey(
        auth: [UInt8],
        tcti: String,
        primary: TPMPrimaryContext
    ) throws(DaemonError) -> [UInt8] {
        try primary.withTPM(tcti) { tpm, context throws(DaemonError) in
            var blob = [UInt8](repeating: 0, count: Int(LA_TPM_MAX_BLOB))
            var size = blob.count
            let rc = la_tpm_ak_create(tpm, &context, auth, auth.count, &blob, &size)
            guard rc == 0 else { throw DaemonError.tpm("making the attestation key", rc) }
            return Array(blob[..<size])
        }
    }

    /// The credential a server wrapped for this TPM's endorsement key and the attestation key's
    /// name (`TPMCredential.make`); fails on any other TPM or for any other attestation key.
    public static func activateCredential(
        credentialBlob: [UInt8],
        encryptedSecret: [UInt8],
        endorsement: EndorsementTemplate,
        attestationKey: [UInt8],
        auth: [UInt8],
        tcti: String,
        primary: TPMPrimaryContext
    ) throws(DaemonError) -> [UInt8] {
        try primary.withTPM(tcti) { tpm, context throws(DaemonError) in
            var out = [UInt8](repeating: 0, count: 64)
            var size = out.count
            let rc = la_tpm_activate_credential(
                tpm,
                &context,
                endorsement.isP384,
                attestationKey,
                attestationKey.count,
                auth,
                auth.count,
                credentialBlob,
                credentialBlob.count,
                encryptedSecret,
                encryptedSecret.count,
                &out,
                &size
            )
            guard rc == 0 else { throw DaemonError.tpm("activating the credential", rc) }
            return Array(out[..<size])
        }
    }

    /// The TPM's statement (TPMS_ATTEST, certify) that the key in `key` is one of its own, with
    /// `qualifyingData` bound in, and the attestation key's ECDSA signature of it (r ‖ s).
    public static func certify(
        key: [UInt8],
        keyAuth: [UInt8],
        attestationKey: [UInt8],
        attestationAuth: [UInt8],
        qualifyingData: [UInt8],
        tcti: String,
        primary: TPMPrimaryContext
    ) throws(DaemonError) -> (statement: [UInt8], signature: [UInt8]) {
        try primary.withTPM(tcti) { tpm, context throws(DaemonError) in
            var statement = [UInt8](repeating: 0, count: 1024)
            var size = statement.count
            var r = [UInt8](repeating: 0, count: 32)
            var s = [UInt8](repeating: 0, count: 32)
            let rc = la_tpm_certify(
                tpm,
                &context,
                key,
                key.count,
                keyAuth,
                keyAuth.count,
                attestationKey,
                attestationKey.count,
                attestationAuth,
                attestationAuth.count,
                qualifyingData,
                qualifyingData.count,
                &statement,
                &size,
                &r,
                &s
            )
            guard rc == 0 else { throw DaemonError.tpm("certifying the key", rc) }
            return (Array(statement[..<size]), r + s)
        }
    }

    /// The public area (TPMT_PUBLIC) inside a key's blob (TPM2B_PUBLIC, then TPM2B_PRIVATE).
    public static func publicArea(ofBlob blob: [UInt8]) -> [UInt8]? {
        guard blob.count >= 2 else { return nil }
        let size = Int(blob[0]) << 8 | Int(blob[1])
        guard blob.count >= 2 + size else { return nil }
        return Array(blob[2..<2 + size])
    }
}
