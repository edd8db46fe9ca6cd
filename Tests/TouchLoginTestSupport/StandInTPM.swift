import Crypto
import Foundation
import SwiftASN1
import TPMWire
import TouchLoginAPI
import WebAuthn
import X509

@testable import TouchLoginServer

/// A software stand-in for a TPM and its maker, for the attestation-key CA in-process: an
/// endorsement key and an attestation key marshalled as a TPM does, the maker's root and its
/// certificate of the endorsement key. Activation needs a real TPM (TouchLoginTPMAttestationTests);
/// `answer` reads the secret from the authority instead, to test what it issues.
public struct StandInTPM: Sendable {
    public let makerKey = P256.Signing.PrivateKey()
    public let endorsement = P256.KeyAgreement.PrivateKey()
    public let attestation = P256.Signing.PrivateKey()
    public let description = TPMDescription(manufacturer: "id:49424D00", model: "swtpm", version: "id:20191023")
    public let now: Double

    public static let endorsementAttributes: TPMPublicArea.Attributes = [
        .fixedTPM, .fixedParent, .sensitiveDataOrigin, .adminWithPolicy, .restricted, .decrypt,
    ]
    public static let attestationAttributes: TPMPublicArea.Attributes = [
        .fixedTPM, .fixedParent, .sensitiveDataOrigin, .userWithAuth, .restricted, .sign,
    ]

    public init(now: Double) { self.now = now }

    public static func area(_ x963: Data, attributes: TPMPublicArea.Attributes, endorsement: Bool) -> Data {
        Data(TPMStandIn.publicArea(x963: x963, attributes: attributes, endorsement: endorsement))
    }

    var makerName: DistinguishedName { try! DistinguishedName { CommonName("test TPM maker") } }

    /// The maker's root: of `key`, or of the maker's own key.
    public func makerRoot(_ key: P256.Signing.PrivateKey? = nil) throws -> Certificate {
        let key = key ?? makerKey
        return try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: Date(timeIntervalSince1970: now - 86_400),
            notValidAfter: Date(timeIntervalSince1970: now + 86_400 * 365),
            issuer: makerName,
            subject: makerName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(key)
        )
    }

    /// The maker's certificate of an endorsement key, shaped as the TCG's profile asks unless told
    /// otherwise.
    public func endorsementCertificate(
        for key: P256.KeyAgreement.PublicKey? = nil,
        naming: Bool = true,
        authority: Bool = false,
        purpose: ASN1ObjectIdentifier? = [2, 23, 133, 8, 1]
    ) throws -> Data {
        var extensions = try Certificate.Extensions {
            Critical(
                authority ? BasicConstraints.isCertificateAuthority(maxPathLength: nil) : .notCertificateAuthority
            )
            Critical(KeyUsage(keyAgreement: true))
        }
        if naming { try extensions.append(description.subjectAlternativeName()) }
        if let purpose {
            try extensions.append(Certificate.Extension(ExtendedKeyUsage([.init(oid: purpose)]), critical: false))
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(
                try P256.Signing.PublicKey(x963Representation: (key ?? endorsement.publicKey).x963Representation)
            ),
            notValidBefore: Date(timeIntervalSince1970: now - 3600),
            notValidAfter: Date(timeIntervalSince1970: now + 86_400 * 365),
            issuer: makerName,
            subject: DistinguishedName(),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: .init(makerKey)
        )
        var der = DER.Serializer()
        try der.serialize(certificate)
        return Data(der.serializedBytes)
    }

    /// What a client presents: this TPM's keys unless told otherwise.
    public func presented(
        endorsementKey: Data? = nil,
        certificate: Data? = nil,
        attestationKey: Data? = nil
    ) throws -> TPMAttestationKeyChallengeRequest {
        TPMAttestationKeyChallengeRequest(
            endorsementKey: (endorsementKey
                ?? Self.area(
                    endorsement.publicKey.x963Representation,
                    attributes: Self.endorsementAttributes,
                    endorsement: true
                ))
                .base64URLEncodedString(),
            endorsementCertificate: try (certificate ?? endorsementCertificate()).base64URLEncodedString(),
            attestationKey: (attestationKey
                ?? Self.area(
                    attestation.publicKey.x963Representation,
                    attributes: Self.attestationAttributes,
                    endorsement: false
                ))
                .base64URLEncodedString()
        )
    }

    /// The answer only the TPM could give: the secret the authority wrapped for `request`.
    public func answer(
        _ challenge: TPMAttestationKeyChallengeResponse,
        _ request: TPMAttestationKeyChallengeRequest,
        by authority: TPMAttestationKeyAuthority,
        at time: Double? = nil
    ) async throws -> TPMAttestationKeyCertificateRequest {
        guard let token = Data(base64URLEncoded: challenge.token) else { throw APIError(.malformedRequest, "token") }
        let secret = authority.secret(
            token: token.prefix(TPMAttestationKeyAuthority.tokenSize - 32),
            try await authority.presented(request, now: time ?? now)
        )
        return TPMAttestationKeyCertificateRequest(
            key: request,
            token: challenge.token,
            secret: secret.base64URLEncodedString()
        )
    }

    /// This TPM's aikCert from `authority` (DER), the whole exchange at `time` (else `now`).
    public func aikCertificate(from authority: TPMAttestationKeyAuthority, at time: Double? = nil) async throws -> Data
    {
        let request = try presented()
        let challenge = try await authority.challenge(request, now: time ?? now)
        let answered = try await answer(challenge, request, by: authority, at: time)
        let issued = try await authority.certificate(answered, now: time ?? now)
        return Data(base64URLEncoded: issued.certificate) ?? Data()
    }
}
