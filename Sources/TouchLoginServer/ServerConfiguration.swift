import Foundation
import WebAuthn
import X509

public struct ServerConfiguration: Sendable {
    /// The relying party: its ID (a registrable domain, `localhost` by default) and the origins
    /// whose clientDataJSON is accepted.
    public var relyingParty = RelyingParty(id: "localhost", origins: ["http://localhost:8080"])
    public var relyingPartyName = "touchlogin"
    public var sessionLifetime: Double = 3600
    public var challengeLifetime: Double = 120
    public var passwordCost = PasswordHasher.defaultCost
    public var rateLimits = RateLimits()
    /// Fingerprint login means the authenticator verified the user: UV is required by default.
    public var requireUserVerification = true
    /// The least time, in seconds, an answer to the passkey options for a name takes: whatever its
    /// look-up cost (a hit or a miss, in SQLite or PostgreSQL), the answer leaves no sooner, so its
    /// time tells nothing of which names have a passkey (measured: docs/benchmarks.md, "What
    /// response times tell"). 0 turns it off.
    public var optionsFloor: Double = 0.005
    /// Seconds after a password entry during which the session may bind or revoke devices.
    public var stepUpWindow: Double = 300
    /// Seconds a failure record is kept after its last failure (a lock is kept until lifted).
    public var failureMemory: Double = 30 * 86_400
    /// Seconds an account's activity (sign-ins, device changes) is kept.
    public var activityMemory: Double = 90 * 86_400
    /// Password checks waiting or running at once; past that the server answers "busy".
    public var passwordChecksAtOnce = 64
    /// Proxies whose `Forwarded` / `X-Forwarded-For` name the client (none by default: the
    /// peer address is the client).
    public var clientAddress = ClientAddress()
    /// Device keys (and, if it says so, passkeys) must be attested to one of these roots; nil:
    /// no attestation is asked (a chain that is sent is checked as a statement, not trusted).
    public var attestation: AttestationTrust?
    /// TPM attestation (`--tpm-maker-roots`): this server certifies the attestation keys of TPMs
    /// whose makers' roots these are, and checks `tpm` statements against its own CA; nil: no
    /// TPM attestation key is certified and a `tpm` statement is checked as a statement only.
    public var tpmAttestation: TPMAttestationPolicy?
    public init() {}
}

/// What the server asks of TPMs (`--tpm-maker-roots`, `--require-hardware-root`).
public struct TPMAttestationPolicy: Sendable {
    /// TPM makers' certificates (roots and intermediates) an endorsement key certificate must
    /// chain to.
    public var makerRoots: [Certificate]
    /// Bind a device key only with a `tpm` statement: the key lives in a TPM a maker vouches for.
    public var requireHardwareRoot: Bool

    public init(makerRoots: [Certificate], requireHardwareRoot: Bool = false) {
        self.makerRoots = makerRoots
        self.requireHardwareRoot = requireHardwareRoot
    }

    /// Every certificate in a PEM file.
    public init(pem: String, requireHardwareRoot: Bool = false) throws {
        self.init(makerRoots: try AttestationTrust.certificates(pem: pem), requireHardwareRoot: requireHardwareRoot)
    }
}
