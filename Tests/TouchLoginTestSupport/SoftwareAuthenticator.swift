import Crypto
import Foundation
import SwiftASN1
import TPMWire
import WebAuthn
import X509

/// A passkey authenticator in the test's own memory (a P-256 key, a credential ID, a counter):
/// what a browser and a security key would send, signed for real, without the daemon.
public struct SoftwareAuthenticator: Sendable {
    public let key = P256.Signing.PrivateKey()
    public let credentialID: Data
    public var origin: String
    public var rpID = "localhost"
    public var counter: UInt32 = 0
    /// What the authenticator reports of itself: flags (BE/BS among them) and its model.
    public var flags: AuthenticatorData.Flags = [.userPresent, .userVerified]
    public var aaguid = Data(count: 16)
    /// A packed attestation's x5c (DER, attestation certificate first), and the key that signs
    /// it when not the credential key; empty: self attestation.
    public var certificates: [Data] = []
    public var attestationKey: P256.Signing.PrivateKey?
    /// Register with a `tpm` statement made by this stand-in TPM: its attestation key and aikCert;
    /// `certificates` then go beside it, as `keyCertificates`.
    public var tpm: (attestationKey: P256.Signing.PrivateKey, certificate: Data)?
    /// What the stand-in TPM states of the credential key: made in it and never leaving it, unless
    /// told otherwise (a key loaded from outside has no fixedTPM, fixedParent or sensitiveDataOrigin).
    public var tpmKeyAttributes: TPMPublicArea.Attributes = [
        .fixedTPM, .fixedParent, .sensitiveDataOrigin, .userWithAuth, .sign,
    ]
    /// The request's `keyCertificates`: the chain that goes beside a `tpm` statement.
    public var keyCertificates: [String]? { tpm == nil ? nil : certificates.map { $0.base64URLEncodedString() } }

    public init(origin: String, credentialID: Data = Data((0..<32).map { _ in UInt8.random(in: 0...255) })) {
        self.origin = origin
        self.credentialID = credentialID
    }

    /// An aikCert for `key` as §8.3.1 shapes one, issued by a CA made for it (no server's).
    public static func aikCertificate(for key: P256.Signing.PrivateKey) throws -> Data {
        let issuer = P256.Signing.PrivateKey()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: Date() - 3600,
            notValidAfter: Date() + 86_400,
            issuer: try DistinguishedName { CommonName("a CA of its own") },
            subject: DistinguishedName(),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                try ExtendedKeyUsage([.init(oid: TPMDescription.attestationKeyPurpose)])
                try TPMDescription(manufacturer: "id:49424D00", model: "swtpm", version: "id:20191023")
                    .subjectAlternativeName()
            },
            issuerPrivateKey: .init(issuer)
        )
        var der = DER.Serializer()
        try der.serialize(certificate)
        return Data(der.serializedBytes)
    }

    /// The answer to `navigator.credentials.create` for these options.
    public func registration(
        challenge: String,
        format: AttestationFormat = .packed,
        transports: [String]? = nil
    ) throws -> RegistrationResponseJSON {
        let clientData = CollectedClientData(type: "webauthn.create", challenge: challenge, origin: origin).jsonData()
        let authData = AuthenticatorData(
            rpID: rpID,
            flags: flags,
            signCount: 0,
            attestedCredential: .init(aaguid: aaguid, credentialID: credentialID, publicKey: COSEKey(key.publicKey))
        )
        let key = attestationKey ?? self.key
        let attestation: Data
        if let tpm {
            let area = TPMStandIn.publicArea(
                x963: self.key.publicKey.x963Representation,
                attributes: tpmKeyAttributes
            )
            attestation = try AttestationObject.makeTPMAttestationObject(
                authenticatorData: authData,
                clientDataHash: Data(SHA256.hash(data: clientData)),
                certificates: [tpm.certificate]
            ) { bound in
                let info = TPMStandIn.certifyStatement(extraData: bound, certifiedName: try TPMPublicArea(area).name)
                return (Data(info), try tpm.attestationKey.signature(for: info).derRepresentation, Data(area))
            }
        } else {
            attestation = try AttestationObject.makeAttestationObject(
                authenticatorData: authData,
                format: format,
                clientDataHash: Data(SHA256.hash(data: clientData)),
                certificates: certificates,
                sign: { try key.signature(for: $0).derRepresentation }
            )
        }
        let id = credentialID.base64URLEncodedString()
        return RegistrationResponseJSON(
            id: id,
            rawId: id,
            response: .init(
                clientDataJSON: clientData.base64URLEncodedString(),
                attestationObject: attestation.base64URLEncodedString(),
                transports: transports
            )
        )
    }

    /// The answer to `navigator.credentials.get`; each one advances the counter unless `counter` is given.
    /// `as`: claim another credential ID (an attacker signing with this key under a leaked ID).
    public mutating func assertion(
        challenge: String,
        origin: String? = nil,
        counter: UInt32? = nil,
        as claimedID: Data? = nil,
        userHandle: Data? = nil
    ) throws -> AuthenticationResponseJSON {
        self.counter = counter ?? self.counter + 1
        let clientData = CollectedClientData(type: "webauthn.get", challenge: challenge, origin: origin ?? self.origin)
            .jsonData()
        let authData = AuthenticatorData(rpID: rpID, flags: flags, signCount: self.counter)
        let signature = try key.signature(for: authData.raw + Data(SHA256.hash(data: clientData))).derRepresentation
        let id = (claimedID ?? credentialID).base64URLEncodedString()
        return AuthenticationResponseJSON(
            id: id,
            rawId: id,
            response: .init(
                clientDataJSON: clientData.base64URLEncodedString(),
                authenticatorData: authData.raw.base64URLEncodedString(),
                signature: signature.base64URLEncodedString(),
                userHandle: userHandle?.base64URLEncodedString()
            )
        )
    }

    /// The same answers as JSON objects, for tests that speak raw HTTP.
    public func registration(options: [String: Any], format: AttestationFormat = .packed) throws -> [String: Any] {
        try Self.object(registration(challenge: options["challenge"] as! String, format: format))
    }

    public mutating func assertion(
        options: [String: Any],
        origin: String? = nil,
        counter: UInt32? = nil
    ) throws -> [String: Any] {
        try Self.object(assertion(challenge: options["challenge"] as! String, origin: origin, counter: counter))
    }

    static func object(_ value: some Encodable) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: JSONEncoder().encode(value)) as! [String: Any]
    }
}
