import Crypto
import Foundation
import SwiftASN1
import TPMWire
import TouchLoginAPI
import WebAuthn
@_spi(FixedExpiryValidationTime) import X509

/// The login server as the certificate authority of TPM attestation keys (`--tpm-maker-roots`):
/// it certifies an attestation key once it has proved that the key lives in a TPM whose
/// endorsement key a TPM maker certified — the maker's certificate chains to a configured root,
/// and a credential wrapped for that endorsement key and bound to the attestation key's name
/// (TPM2_MakeCredential) came back opened (TPM2_ActivateCredential). The certificate it issues is
/// WebAuthn's aikCert (§8.3.1): a `tpm` attestation statement's `x5c` chains to `root`.
///
/// Stateless, like `SignedChallenge`: the wrapped secret is a MAC, under this deployment's secret,
/// of the token and of what was presented, so any instance checks the answer and nothing is
/// stored. The CA key is derived from the same secret (HKDF, its own label): every instance
/// issues under the same key, and nothing new needs keeping (each process signs its own copy of
/// the root: the same name and key, other signature bytes).
public struct TPMAttestationKeyAuthority: Sendable {
    /// The TPM makers' roots (and intermediates: every certificate in the file is an anchor).
    public let makerRoots: [Certificate]
    /// How long a challenge may be answered, and how long an aikCert is valid from its issue.
    static let challengeLifetime: Double = 120
    static let certificateLifetime: Double = 86_400
    static let tokenSize = 1 + 8 + 16 + 32

    let key: P256.Signing.PrivateKey
    let macKey: SymmetricKey
    public let root: Certificate

    public init(makerRoots: [Certificate], secret: SymmetricKey) throws {
        self.makerRoots = makerRoots
        let derived = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: secret,
            info: Data("touchlogin tpm attestation-key CA".utf8),
            outputByteCount: 64
        ).withUnsafeBytes { Data($0) }
        // A scalar past the group order (odds 2^-32) is refused by swift-crypto: then no CA.
        key = try P256.Signing.PrivateKey(rawRepresentation: derived.prefix(32))
        macKey = SymmetricKey(data: derived.suffix(32))
        let name = try DistinguishedName {
            OrganizationName("touchlogin")
            CommonName("touchlogin TPM attestation-key CA")
        }
        let publicKey = Certificate.PublicKey(key.publicKey)
        root = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(
                bytes: Array(SHA256.hash(data: key.publicKey.x963Representation).prefix(16))
            ),
            publicKey: publicKey,
            notValidBefore: Date(timeIntervalSince1970: 946_684_800),
            notValidAfter: Date(timeIntervalSince1970: 253_402_300_799),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
                SubjectKeyIdentifier(hash: publicKey)
            },
            issuerPrivateKey: Certificate.PrivateKey(key)
        )
    }

    /// The three things presented, parsed and checked: a maker-certified endorsement key, and an
    /// attestation key of the kind that signs only what its TPM states.
    struct Presented {
        var endorsementKey: TPMPublicArea
        var attestationKey: TPMPublicArea
        var description: TPMDescription
        var digest: Data
    }

    func presented(_ r: TPMAttestationKeyChallengeRequest, now: Double) async throws -> Presented {
        guard let ekBytes = Data(base64URLEncoded: r.endorsementKey),
            let certificateBytes = Data(base64URLEncoded: r.endorsementCertificate),
            let akBytes = Data(base64URLEncoded: r.attestationKey),
            [ekBytes, certificateBytes, akBytes].allSatisfy({ $0.count <= 4096 })
        else { throw APIError(.malformedRequest, "The TPM's keys and certificate must be base64url, 4 KB at most.") }
        let ek: TPMPublicArea
        let ak: TPMPublicArea
        do {
            ek = try TPMPublicArea(ekBytes)
            ak = try TPMPublicArea(akBytes)
        } catch {
            throw APIError(.malformedRequest, "A key is not an ECC TPMT_PUBLIC: \(error)")
        }
        let certificate: Certificate
        do { certificate = try Certificate(derEncoded: Array(certificateBytes)) } catch {
            throw APIError(.malformedRequest, "The endorsement certificate is not DER X.509.")
        }
        let certifiedPoint: [UInt8]? =
            switch ek.curve {
            case .p256: P256.Signing.PublicKey(certificate.publicKey).map { Array($0.x963Representation) }
            case .p384: P384.Signing.PublicKey(certificate.publicKey).map { Array($0.x963Representation) }
            }
        guard certifiedPoint == ek.x963 else {
            throw APIError(.attestationUntrusted, "The endorsement certificate is for another key.")
        }
        try Self.checkEndorsementCertificate(certificate)
        let endorsement: TPMPublicArea.Attributes = [
            .fixedTPM, .fixedParent, .sensitiveDataOrigin, .restricted, .decrypt,
        ]
        guard ek.attributes.isSuperset(of: endorsement), !ek.attributes.contains(.sign) else {
            throw APIError(.attestationUntrusted, "The endorsement key is not a restricted decryption key of its TPM.")
        }
        let attestation: TPMPublicArea.Attributes = [.fixedTPM, .fixedParent, .sensitiveDataOrigin, .restricted, .sign]
        guard ak.attributes.isSuperset(of: attestation), !ak.attributes.contains(.decrypt), ak.curve == .p256,
            ak.nameAlgorithm == .sha256
        else {
            throw APIError(
                .attestationUntrusted,
                "The attestation key is not a P-256 restricted signing key that never leaves its TPM."
            )
        }
        guard await Self.chains(certificate, to: makerRoots, at: now) else {
            throw APIError(
                .attestationUntrusted,
                "The endorsement certificate does not chain to a TPM maker this server trusts."
            )
        }
        var digest = SHA256()
        for part in [ekBytes, certificateBytes, akBytes] {
            digest.update(data: Data(SHA256.hash(data: part)))
        }
        return Presented(
            endorsementKey: ek,
            attestationKey: ak,
            description: try TPMDescription(certificate),
            digest: Data(digest.finalize())
        )
    }

    /// tcg-kp-EKCertificate.
    static let endorsementCertificatePurpose: ASN1ObjectIdentifier = [2, 23, 133, 8, 1]

    /// An endorsement key's certificate, not any certificate under a maker's CA that names a TPM:
    /// not a CA; its key usage, if stated, for key agreement or encipherment (an ECC or RSA
    /// endorsement key decrypts); its extended key usage, if stated, tcg-kp-EKCertificate.
    static func checkEndorsementCertificate(_ certificate: Certificate) throws {
        func refuse(_ why: String) -> APIError {
            APIError(.attestationUntrusted, "The endorsement certificate \(why).")
        }
        switch try? certificate.extensions.basicConstraints {
        case .notCertificateAuthority?: break
        case nil where certificate.extensions[oid: .X509ExtensionID.basicConstraints] == nil: break
        default: throw refuse("is a CA's, or its basic constraints are unreadable")
        }
        if certificate.extensions[oid: .X509ExtensionID.keyUsage] != nil {
            guard let usage = try? certificate.extensions.keyUsage, usage.keyAgreement || usage.keyEncipherment else {
                throw refuse("is not for key agreement or encipherment")
            }
        }
        if certificate.extensions[oid: .X509ExtensionID.extendedKeyUsage] != nil {
            guard let usages = try? certificate.extensions.extendedKeyUsage,
                usages.contains(ExtendedKeyUsage.Usage(oid: Self.endorsementCertificatePurpose))
            else { throw refuse("is not for an endorsement key (tcg-kp-EKCertificate)") }
        }
    }

    /// The secret for `token` and what was presented with it.
    func secret(token body: Data, _ presented: Presented) -> Data {
        Data(
            HMAC<SHA256>.authenticationCode(
                for: Data("tpm-ak-secret\u{0}".utf8) + body + presented.digest,
                using: macKey
            )
        )
    }

    public func challenge(
        _ r: TPMAttestationKeyChallengeRequest,
        now: Double
    ) async throws
        -> TPMAttestationKeyChallengeResponse
    {
        let presented = try await presented(r, now: now)
        let milliseconds = UInt64((now + Self.challengeLifetime) * 1000)
        var body = Data([1])
        body.append(contentsOf: (0..<8).reversed().map { UInt8(truncatingIfNeeded: milliseconds >> (8 * $0)) })
        body.append(contentsOf: (0..<16).map { _ in UInt8.random(in: 0...255) })
        let token =
            body + Data(HMAC<SHA256>.authenticationCode(for: Data("tpm-ak-token\u{0}".utf8) + body, using: macKey))
        let wrapped: TPMCredential.Wrapped
        do {
            wrapped = try TPMCredential.make(
                Array(secret(token: body, presented)),
                endorsementKey: presented.endorsementKey,
                objectName: presented.attestationKey.name
            )
        } catch {
            throw APIError(.attestationUntrusted, "No credential can be made for this endorsement key: \(error)")
        }
        return TPMAttestationKeyChallengeResponse(
            credentialBlob: Data(wrapped.credentialBlob).base64URLEncodedString(),
            encryptedSecret: Data(wrapped.encryptedSecret).base64URLEncodedString(),
            token: token.base64URLEncodedString()
        )
    }

    /// The aikCert, when `secret` is what the TPM opened for this token and these keys.
    public func certificate(
        _ r: TPMAttestationKeyCertificateRequest,
        now: Double
    ) async throws
        -> TPMAttestationKeyCertificateResponse
    {
        guard let token = Data(base64URLEncoded: r.token), token.count == Self.tokenSize, token.first == 1,
            HMAC<SHA256>.isValidAuthenticationCode(
                token.suffix(32),
                authenticating: Data("tpm-ak-token\u{0}".utf8) + token.prefix(Self.tokenSize - 32),
                using: macKey
            )
        else { throw APIError(.challengeUnknown, "That attestation-key challenge was not issued here.") }
        let body = token.prefix(Self.tokenSize - 32)
        let milliseconds = body.dropFirst().prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard Double(milliseconds) / 1000 > now else {
            throw APIError(.challengeExpired, "That attestation-key challenge has expired.")
        }
        let presented = try await presented(r.key, now: now)
        guard let answer = Data(base64URLEncoded: r.secret),
            HMAC<SHA256>.isValidAuthenticationCode(
                answer,
                authenticating: Data("tpm-ak-secret\u{0}".utf8) + body + presented.digest,
                using: macKey
            )
        else {
            throw APIError(
                .attestationUntrusted,
                "The secret is not the one wrapped for this endorsement key and attestation key."
            )
        }
        guard let akKey = try? P256.Signing.PublicKey(x963Representation: presented.attestationKey.x963) else {
            throw APIError(.attestationUntrusted, "The attestation key's point is not on P-256.")
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(akKey),
            notValidBefore: Date(timeIntervalSince1970: now - 300),
            notValidAfter: Date(timeIntervalSince1970: now + Self.certificateLifetime),
            issuer: root.subject,
            subject: DistinguishedName(),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([ExtendedKeyUsage.Usage(oid: TPMDescription.attestationKeyPurpose)])
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: root.publicKey).keyIdentifier)
                try presented.description.subjectAlternativeName()
            },
            issuerPrivateKey: Certificate.PrivateKey(key)
        )
        var der = DER.Serializer()
        try der.serialize(certificate)
        return TPMAttestationKeyCertificateResponse(
            certificate: Data(der.serializedBytes).base64URLEncodedString(),
            root: try root.serializeAsPEM().pemString
        )
    }

    /// Whether `chain` (a `tpm` statement's `x5c`, verified as a statement) is an aikCert this
    /// authority issued and still valid at `now`; answers the TPM it describes.
    public func check(_ chain: [Data], now: Double) async throws -> TPMDescription {
        guard let leafBytes = chain.first, let leaf = try? Certificate(derEncoded: Array(leafBytes)) else {
            throw APIError(.attestationUntrusted, "The aikCert could not be read.")
        }
        guard await Self.chains(leaf, to: [root], at: now) else {
            throw APIError(
                .attestationUntrusted,
                "The aikCert was not issued by this server's TPM attestation-key CA, or has expired."
            )
        }
        return try TPMDescription(leaf)
    }

    /// Whether a TPM's certificate (an endorsement key's, an aikCert) chains to one of `roots` at
    /// `now`, naming its TPM (`TPMDescriptionPolicy`: its critical subject alternative name).
    static func chains(_ leaf: Certificate, to roots: [Certificate], at now: Double) async -> Bool {
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy(fixedExpiryValidationTime: Date(timeIntervalSince1970: now))
            TPMDescriptionPolicy()
        }
        guard case .validCertificate = await verifier.validate(leaf: leaf, intermediates: CertificateStore()) else {
            return false
        }
        return true
    }
}
