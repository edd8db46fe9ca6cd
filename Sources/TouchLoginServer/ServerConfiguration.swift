import Foundation
import WebAuthn

public struct ServerConfiguration: Sendable {
    /// The relying party: its ID (a registrable domain, `localhost` by default) and the origins
    /// whose clientDataJSON is accepted.
    public var relyingParty = RelyingParty(id: "localhost", origins: ["http://localhost:8080"])
    public var relyingPartyName = "touchlogin"
    public var sessionLifetime: Double = 3600
    public var challengeLifetime: Double = 120
    public var passwordCost = 15
    public var rateLimits = RateLimits()
    /// Fingerprint login means the authenticator verified the user: UV is required by default.
    public var requireUserVerification = true
    public init() {}
}
