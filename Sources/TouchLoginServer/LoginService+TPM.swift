import Foundation
import TouchLoginAPI
import WebAuthn

/// TPM attestation keys: the server certifies them (`TPMAttestationKeyAuthority`) for a session
/// that may bind devices, and checks the `tpm` statements made with them.
extension LoginService {
    func tpmAuthority() async throws -> TPMAttestationKeyAuthority {
        guard let policy = configuration.tpmAttestation else {
            throw APIError(
                .notFound,
                "This server certifies no TPM attestation keys (it was started without --tpm-maker-roots)."
            )
        }
        return try TPMAttestationKeyAuthority(makerRoots: policy.makerRoots, secret: try await secretKey())
    }

    public func tpmAttestationKeyChallenge(
        session: Session,
        _ r: TPMAttestationKeyChallengeRequest
    ) async throws -> TPMAttestationKeyChallengeResponse {
        try requireFreshPassword(session)
        return try await tpmAuthority().challenge(r, now: clock())
    }

    public func tpmAttestationKeyCertificate(
        session: Session,
        _ r: TPMAttestationKeyCertificateRequest
    ) async throws -> TPMAttestationKeyCertificateResponse {
        try requireFreshPassword(session)
        let response = try await tpmAuthority().certificate(r, now: clock())
        logger.info("TPM attestation key certified")
        return response
    }

    /// The attestation-key CA's root (PEM): what a relying party that checks this server's `tpm`
    /// statements itself (py_webauthn's `pem_root_certs_bytes_by_fmt`) trusts.
    public func tpmAttestationRoot() async throws -> String {
        try await tpmAuthority().root.serializeAsPEM().pemString
    }

    /// The TPM a registration's `tpm` statement vouches for, checked against this server's CA; nil
    /// for another format. A device key without one is refused under `--require-hardware-root`.
    func hardwareRoot(of verified: VerifiedRegistration, kind: CredentialKind) async throws -> TPMDescription? {
        var described: TPMDescription?
        if verified.attestationFormat == AttestationFormat.tpm.rawValue, configuration.tpmAttestation != nil {
            described = try await tpmAuthority().check(verified.attestationCertificates, now: clock())
        }
        if described == nil, kind == .deviceKey, configuration.tpmAttestation?.requireHardwareRoot == true {
            throw APIError(
                .attestationRequired,
                "This server binds device keys only from a TPM root: the registration must carry a tpm attestation."
            )
        }
        return described
    }
}
