import Foundation
import KeyAttestation
import SwiftASN1
import TouchLoginAPI
import WebAuthn
import X509

/// The attestation this server asks of device keys, and the roots it trusts for it
/// (`--require-attestation ROOT.pem`): each machine's laenclaved root, as `lactl
/// attestation-root` prints it. A device key is bound only when its registration carries a
/// packed attestation whose chain leads to one of those roots, whose certificate is of the
/// credential key itself, and whose statement (`KeyDescription`) says every use of the key needs
/// the user. Browser passkeys are not asked unless `forPasskeys` (they rarely attest, and never
/// to a laenclaved root).
public struct AttestationTrust: Sendable {
    public var roots: [Certificate]
    /// Ask passkeys too: then only attested laenclaved keys can be registered at all.
    public var forPasskeys = false
    /// Accept keys of daemons that take scripted touches (`allow-simulation`; tests and demos).
    public var allowSimulation = false

    public init(roots: [Certificate], forPasskeys: Bool = false, allowSimulation: Bool = false) {
        self.roots = roots; self.forPasskeys = forPasskeys; self.allowSimulation = allowSimulation
    }

    /// Every certificate in a PEM file (several roots may share one).
    public init(pem: String, forPasskeys: Bool = false, allowSimulation: Bool = false) throws {
        let documents = try PEMDocument.parseMultiple(pemString: pem)
        let roots = try documents.map { try Certificate(pemDocument: $0) }
        guard !roots.isEmpty else { throw APIError(.malformedRequest, "no certificate in the attestation roots file") }
        self.init(roots: roots, forPasskeys: forPasskeys, allowSimulation: allowSimulation)
    }

    /// Whether a registration of this kind must be attested.
    public func applies(to kind: CredentialKind) -> Bool { kind == .deviceKey || forPasskeys }

    /// The attested key's description if `verified` carries an attestation this server trusts
    /// for a key it accepts; else the error that says which part is missing or wrong.
    public func check(_ verified: VerifiedRegistration, now: Date) async throws -> KeyDescription {
        guard !verified.attestationCertificates.isEmpty else {
            throw APIError(.attestationRequired, "This server binds only device keys attested by laenclaved; this registration carried no certificate chain (a software key, or an authenticator that does not attest).")
        }
        let certificates: [Certificate]
        do { certificates = try verified.attestationCertificates.map { try Certificate(derEncoded: Array($0)) } } catch {
            throw APIError(.attestationUntrusted, "An attestation certificate could not be read.")
        }
        let leaf = certificates[0]
        guard let credentialKey = verified.publicKey.p256, leaf.publicKey == Certificate.PublicKey(credentialKey) else {
            throw APIError(.attestationUntrusted, "The attestation certifies another key than the one being registered.")
        }
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) { RFC5280Policy(validationTime: now) }
        guard case .validCertificate = await verifier.validate(leaf: leaf, intermediates: CertificateStore(Array(certificates.dropFirst()))) else {
            throw APIError(.attestationUntrusted, "The attestation does not chain to an attestation root this server trusts.")
        }
        guard verified.aaguid == LaenclavedAttestation.aaguid, let stated = leaf.extensions[oid: KeyDescription.extensionID],
              let description = try? KeyDescription(derBytes: stated.value) else {
            throw APIError(.attestationUntrusted, "The attestation is not a laenclaved key description.")
        }
        guard description.verifiesUserOnEveryUse else {
            throw APIError(.attestationUntrusted, "The key can be used without the user (its access control is \(description.accessControl.names)).")
        }
        if !allowSimulation && (description.simulationAllowed || description.sensor == .simulated) {
            throw APIError(.attestationUntrusted, "The key's daemon accepts simulated touches, so its fingerprint checks prove nothing.")
        }
        return description
    }
}
