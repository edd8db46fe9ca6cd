extension Request {
    /// The first request on a connection: the protocol version the client speaks, and the
    /// codings it reads besides JSON (`WireEncoding`), of which the daemon picks one.
    public struct Hello: RequestArguments {
        public var version: Int
        /// `WireEncoding` names; a daemon that knows none of them speaks JSON.
        public var encodings: [String]?
        public init(version: Int, encodings: [String]? = nil) {
            self.version = version
            self.encodings = encodings
        }

        /// The coding the daemon speaks after its answer: binary when offered, else JSON.
        public var chosenEncoding: WireEncoding {
            encodings?.contains(WireEncoding.binary.rawValue) == true ? .binary : .json
        }
    }
}
