extension Request {
    /// The first request on a connection: the protocol version the client speaks.
    public struct Hello: RequestArguments {
        public var version: Int
        public init(version: Int) { self.version = version }
    }
}
