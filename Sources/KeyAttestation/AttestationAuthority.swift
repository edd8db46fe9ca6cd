import Crypto
import EnclaveProtocol
import Foundation
import SwiftASN1
import X509

/// A machine's attestation authority: a root made once, used once to certify the attestation
/// key and then forgotten (its private half is never stored), and the attestation key, which
/// certifies the public half of each key the daemon holds with a statement of how that key is
/// protected (`KeyDescription`). An administrator hands the root's certificate to servers;
/// a server that trusts it knows the daemon made and holds the key, and how. The attestation
/// key's certificate states the daemon's mode, signed by the root when it is made, so whoever
/// later reads the attestation key (a user-mode daemon's is the user's file) cannot make its
/// chains claim a system daemon.
///
/// Names are generic: every chain goes to servers, and a host or user name there would tell them
/// more than that this machine's laenclaved holds the key.
///
/// Pure: the caller keeps the result (`stored`); no I/O and no clock here.
public struct AttestationAuthority: Sendable {
    public let root: Certificate
    public let certificate: Certificate
    let key: P256.Signing.PrivateKey

    /// Validity has no meaning here: a key is certified for as long as the daemon holds it, and a
    /// server checks the chain when the key is bound. So every certificate is valid from
    /// 2000-01-01 (a clock that was wrong when the daemon first started, or is wrong where the
    /// chain is checked, changes nothing) to RFC 5280 §4.1.2.5's "no expiry", 99991231235959Z.
    static let validFrom = Date(timeIntervalSince1970: 946_684_800)
    static let noExpiry = Date(timeIntervalSince1970: 253_402_300_799)

    /// A new root and attestation key for a daemon of `daemonMode`.
    public static func create(daemonMode: DaemonMode) throws -> AttestationAuthority {
        let rootKey = P256.Signing.PrivateKey()
        let rootName = try name(common: "laenclaved attestation root")
        let rootPublic = Certificate.PublicKey(rootKey.publicKey)
        let root = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: rootPublic,
            notValidBefore: validFrom,
            notValidAfter: noExpiry,
            issuer: rootName,
            subject: rootName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 1))
                Critical(KeyUsage(keyCertSign: true))
                SubjectKeyIdentifier(hash: rootPublic)
            },
            issuerPrivateKey: Certificate.PrivateKey(rootKey)
        )
        let key = P256.Signing.PrivateKey()
        let keyPublic = Certificate.PublicKey(key.publicKey)
        var extensions = try Certificate.Extensions {
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
            Critical(KeyUsage(keyCertSign: true))
            SubjectKeyIdentifier(hash: keyPublic)
            AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: rootPublic).keyIdentifier)
        }
        var mode = DER.Serializer()
        try mode.serialize(ASN1UTF8String(daemonMode.rawValue))
        try extensions.append(
            Certificate.Extension(
                oid: LaenclavedAttestation.daemonModeExtensionID,
                critical: false,
                value: ArraySlice(mode.serializedBytes)
            )
        )
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: keyPublic,
            notValidBefore: validFrom,
            notValidAfter: noExpiry,
            issuer: rootName,
            subject: try name(common: "laenclaved attestation key"),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(rootKey)
        )
        return AttestationAuthority(root: root, certificate: certificate, key: key)
    }

    /// A certificate for `publicKey` (a key the daemon holds) stating `description`: the first
    /// certificate of a packed attestation's x5c, as WebAuthn §8.2.1 shapes it.
    public func certify(_ publicKey: P256.Signing.PublicKey, as description: KeyDescription) throws -> Certificate {
        var extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: certificate.publicKey).keyIdentifier)
        }
        var aaguid = DER.Serializer()
        try aaguid.serialize(ASN1OctetString(contentBytes: ArraySlice(LaenclavedAttestation.aaguid)))
        try extensions.append(
            Certificate.Extension(
                oid: LaenclavedAttestation.fidoAAGUIDExtensionID,
                critical: false,
                value: ArraySlice(aaguid.serializedBytes)
            )
        )
        try extensions.append(
            Certificate.Extension(
                oid: KeyDescription.extensionID,
                critical: false,
                value: ArraySlice(try description.derBytes())
            )
        )
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(publicKey),
            notValidBefore: Self.validFrom,
            notValidAfter: Self.noExpiry,
            issuer: certificate.subject,
            subject: try Self.name(common: "laenclaved key"),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(key)
        )
    }

    /// The packed x5c for a key: its certificate, then the attestation key's (not the root: the
    /// server has that).
    public func chain(for publicKey: P256.Signing.PublicKey, as description: KeyDescription) throws -> [Data] {
        [try Self.der(certify(publicKey, as: description)), try Self.der(certificate)]
    }

    /// The daemon mode an attestation key's certificate states, if it is one of ours.
    public static func daemonMode(of attestationKeyCertificate: Certificate) -> DaemonMode? {
        guard let stated = attestationKeyCertificate.extensions[oid: LaenclavedAttestation.daemonModeExtensionID],
            let text = try? ASN1UTF8String(derEncoded: stated.value)
        else { return nil }
        return DaemonMode(rawValue: String(text))
    }

    /// SHA-256 of a certificate's SubjectPublicKeyInfo (DER), hex: how a root is named in logs,
    /// in `lactl attestation-root`'s label line and in servers' records of attested keys (the
    /// same as `openssl x509 -pubkey -noout | openssl pkey -pubin -outform DER | sha256sum`).
    public static func fingerprint(of certificate: Certificate) throws -> String {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate.publicKey)
        return SHA256.hash(data: serializer.serializedBytes).map { String(format: "%02x", $0) }.joined()
    }

    /// The root in PEM, as an administrator hands it to servers.
    public var rootPEM: String {
        get throws { try root.serializeAsPEM().pemString }
    }

    // MARK: Keeping it

    /// What the daemon stores: both certificates and the attestation key (the root key is gone).
    public struct Stored: Codable, Equatable, Sendable {
        public var root: Data
        public var certificate: Data
        public var key: Data
        public init(root: Data, certificate: Data, key: Data) {
            self.root = root
            self.certificate = certificate
            self.key = key
        }
    }

    public var stored: Stored {
        get throws {
            Stored(root: try Self.der(root), certificate: try Self.der(certificate), key: key.rawRepresentation)
        }
    }

    public init(_ stored: Stored) throws {
        root = try Certificate(derEncoded: Array(stored.root))
        certificate = try Certificate(derEncoded: Array(stored.certificate))
        key = try P256.Signing.PrivateKey(rawRepresentation: stored.key)
        guard certificate.publicKey == Certificate.PublicKey(key.publicKey) else {
            throw AttestationAuthorityError("the stored attestation key does not match its certificate")
        }
    }

    init(root: Certificate, certificate: Certificate, key: P256.Signing.PrivateKey) {
        self.root = root
        self.certificate = certificate
        self.key = key
    }

    public static func der(_ certificate: Certificate) throws -> Data {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return Data(serializer.serializedBytes)
    }

    /// WebAuthn §8.2.1: C, O, OU "Authenticator Attestation", CN. "ZZ" is a user-assigned
    /// ISO 3166 code: laenclaved runs on a machine, not in a country.
    static func name(common: String) throws -> DistinguishedName {
        try DistinguishedName {
            CountryName("ZZ")
            OrganizationName("laenclaved")
            OrganizationalUnitName(LaenclavedAttestation.attestationUnit)
            CommonName(common)
        }
    }
}

public struct AttestationAuthorityError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
