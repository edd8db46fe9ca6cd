import Foundation
import TPMWire
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
        let secret = try await secretKey()
        return try tpmAuthorityCache.value {
            try TPMAttestationKeyAuthority(makerRoots: policy.makerRoots, secret: secret)
        }
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
    /// for another format. Any registration without one is refused under `--require-hardware-root`
    /// (the kind is the client's word: a passkey logs in as a device key does).
    func hardwareRoot(of verified: VerifiedRegistration) async throws -> TPMDescription? {
        var described: TPMDescription?
        if verified.attestationFormat == AttestationFormat.tpm.rawValue, configuration.tpmAttestation != nil {
            described = try await tpmAuthority().check(verified.attestationCertificates, now: clock())
            // TPM2_Certify states any object loaded in the TPM, a key loaded from outside it
            // (TPM2_LoadExternal) or one made to be duplicated too: the key's own attributes say
            // whether it was made in this TPM and can never leave it.
            let area = verified.tpmPublicArea.flatMap { try? TPMPublicArea($0) }
            guard let area, area.attributes.isSuperset(of: Self.keptInTheTPM) else {
                throw APIError(
                    .attestationUntrusted,
                    "The TPM certified a key that was not made in it or can leave it (fixedTPM, fixedParent and sensitiveDataOrigin are required)."
                )
            }
        }
        if described == nil, configuration.tpmAttestation?.requireHardwareRoot == true {
            throw APIError(
                .attestationRequired,
                "This server binds keys only from a TPM root: the registration must carry a tpm attestation."
            )
        }
        return described
    }

    /// A key the TPM made (sensitiveDataOrigin) and that can never leave it (fixedTPM, fixedParent).
    static let keptInTheTPM: TPMPublicArea.Attributes = [.fixedTPM, .fixedParent, .sensitiveDataOrigin, .sign]
}
