import Crypto
import Foundation
import KeyAttestation
import Logging
import SwiftASN1
import TouchLoginAPI
import WebAuthn
@_spi(FixedExpiryValidationTime) import X509

/// The attestation this server asks of new credentials, and the roots it trusts for it
/// (`--require-attestation ROOTS.pem`): each machine's laenclaved root, as `lactl
/// attestation-root` prints it. A credential is bound only when its registration carries a
/// packed attestation whose chain leads to one of those roots, whose certificate is of the
/// credential key itself, from a system daemon (the mode the root signed into the attestation
/// key's certificate), and whose statement (`KeyDescription`) says using the key needs the user
/// and that the daemon takes no simulated touches. Every registration is asked unless
/// `allowUnattestedPasskeys`; then only those that say they are device keys (the client's word).
public struct AttestationTrust: Sendable {
    public var roots: [Certificate]
    /// Let registrations that say they are passkeys (a browser's) through unattested.
    public var allowUnattestedPasskeys = false
    /// Accept chains of user-mode daemons, whose attestation key is the user's own file: what
    /// their leaves state is then the user's word (tests, single-user machines).
    public var allowUserDaemons = false
    /// Accept keys of daemons that take scripted touches (`allow-simulation`; tests and demos).
    public var allowSimulation = false

    public init(
        roots: [Certificate],
        allowUnattestedPasskeys: Bool = false,
        allowUserDaemons: Bool = false,
        allowSimulation: Bool = false
    ) {
        self.roots = roots
        self.allowUnattestedPasskeys = allowUnattestedPasskeys
        self.allowUserDaemons = allowUserDaemons
        self.allowSimulation = allowSimulation
    }

    /// Every certificate in a PEM file (several roots may share one; text around them is ignored).
    public init(
        pem: String,
        allowUnattestedPasskeys: Bool = false,
        allowUserDaemons: Bool = false,
        allowSimulation: Bool = false
    ) throws {
        self.init(
            roots: try Self.certificates(pem: pem),
            allowUnattestedPasskeys: allowUnattestedPasskeys,
            allowUserDaemons: allowUserDaemons,
            allowSimulation: allowSimulation
        )
    }

    /// Every certificate in a PEM file: at least one, or why not.
    public static func certificates(pem: String) throws -> [Certificate] {
        let certificates: [Certificate]
        do {
            certificates = try PEMDocument.parseMultiple(pemString: pem).map { try Certificate(pemDocument: $0) }
        } catch {
            throw LoginServerError(.attestationRoots, "not PEM certificates: \(error)")
        }
        guard !certificates.isEmpty else { throw LoginServerError(.attestationRoots, "no certificate in it") }
        return certificates
    }

    /// Whether a registration of this kind must be attested.
    public func applies(to kind: CredentialKind) -> Bool { kind == .deviceKey || !allowUnattestedPasskeys }

    /// What the attestation vouched for: the key's description and which root vouched.
    public struct AttestedKey: Sendable, Equatable {
        public var description: KeyDescription
        /// `AttestationAuthority.fingerprint(of:)` of the root: `touchlogin-server admin account`
        /// shows it (in `attestedKey`) and `lactl attestation-root` prints it beside the root, so
        /// an operator can find the keys a root vouched for.
        public var rootFingerprint: String
        /// As stored and shown: the description and the root's fingerprint (first 16 hex digits).
        public var summary: String { "\(description.summary); root \(rootFingerprint.prefix(16))" }
    }

    /// The attested key if `verified` carries an attestation this server trusts for a key it
    /// accepts; else the error that says which part is missing or wrong.
    /// `chain`: the laenclaved chain of the key, when it is not the statement's own `x5c` (a `tpm`
    /// statement's is its aikCert's).
    public func check(
        _ verified: VerifiedRegistration,
        chain presented: [Data]? = nil,
        now: Date,
        logger: Logger? = nil
    ) async throws -> AttestedKey {
        let presented = presented ?? verified.attestationCertificates
        guard !presented.isEmpty else {
            throw APIError(
                .attestationRequired,
                "This server binds only keys attested by laenclaved; this registration carried no certificate chain (a software key, or an authenticator that does not attest)."
            )
        }
        let certificates: [Certificate]
        do { certificates = try presented.map { try Certificate(derEncoded: Array($0)) } } catch {
            throw APIError(.attestationUntrusted, "An attestation certificate could not be read.")
        }
        let leaf = certificates[0]
        guard let credentialKey = verified.publicKey.p256, leaf.publicKey == Certificate.PublicKey(credentialKey) else {
            throw APIError(
                .attestationUntrusted,
                "The attestation certifies another key than the one being registered."
            )
        }
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy(fixedExpiryValidationTime: now)
        }
        let chain: ValidatedCertificateChain
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore(Array(certificates.dropFirst()))) {
        case .validCertificate(let validated): chain = validated
        case .couldNotValidate(let failures):
            logger?.notice(
                "attestation chain not validated",
                metadata: ["failures": "\(failures.map(\.policyFailureReason))"]
            )
            throw APIError(
                .attestationUntrusted,
                "The attestation does not chain to an attestation root this server trusts."
            )
        }
        guard verified.aaguid == LaenclavedAttestation.aaguid,
            let stated = leaf.extensions[oid: KeyDescription.extensionID],
            let description = try? KeyDescription(derBytes: stated.value), chain.count == 3,
            let mode = AttestationAuthority.daemonMode(of: chain[1])
        else {
            throw APIError(.attestationUntrusted, "The attestation is not a laenclaved key description.")
        }
        // The mode the root signed, not the leaf's word: a user-mode daemon's attestation key is
        // the user's file, and anyone holding it can write any leaf.
        guard mode == description.daemonMode else {
            throw APIError(
                .attestationUntrusted,
                "The key claims a \(description.daemonMode.rawValue) daemon; its attestation key is a \(mode.rawValue) daemon's."
            )
        }
        if mode == .user && !allowUserDaemons {
            throw APIError(
                .attestationUntrusted,
                "The key was attested by a user-mode daemon, whose statements are the user's own word; this server accepts system daemons only."
            )
        }
        guard description.needsUserAuthentication else {
            throw APIError(
                .attestationUntrusted,
                "The key can be used without the user (its access control is \(description.accessControl.names))."
            )
        }
        if !allowSimulation && (description.simulationAllowed || description.sensor == .simulated) {
            throw APIError(
                .attestationUntrusted,
                "The key's daemon accepts simulated touches, so its fingerprint checks prove nothing."
            )
        }
        return AttestedKey(
            description: description,
            rootFingerprint: try AttestationAuthority.fingerprint(of: chain.root)
        )
    }
}

extension AttestationTrust {
    /// What is stored and shown of a device's attestation: the laenclaved statement, and the TPM
    /// a `tpm` statement vouched for ("TPM id:49424D00 swtpm").
    public static func summary(_ attested: AttestedKey?, hardware: TPMDescription?) -> String? {
        let parts = [attested?.summary, hardware.map { "TPM \($0.manufacturer) \($0.model)" }].compactMap { $0 }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }
}
