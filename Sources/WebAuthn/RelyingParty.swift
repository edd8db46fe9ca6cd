/// The relying party's identity: what every response is checked against.
public struct RelyingParty: Sendable, Equatable {
    /// The RP ID, a registrable domain such as "example.com" (no scheme, no port).
    public var id: String
    /// Origins allowed to run ceremonies, compared exactly, e.g. "https://example.com" or
    /// "https://login.example.com:8443". No normalisation: no trailing slash, lowercase host.
    public var origins: [String]
    /// Whether ceremonies may run inside a cross-origin iframe (clientData.crossOrigin = true).
    public var allowCrossOrigin = false
    /// When cross-origin use is allowed: the top-level origins that may embed the RP. `nil`
    /// accepts any top origin; ignored when `allowCrossOrigin` is false.
    public var topOrigins: [String]? = nil

    public init(id: String, origins: [String]) {
        self.id = id
        self.origins = origins
    }
}
