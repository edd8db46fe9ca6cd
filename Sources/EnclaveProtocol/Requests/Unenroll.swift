extension Request {
    /// Removes an enrolled identity (the daemon asks for the passcode); a name never enrolled is
    /// `notFound`.
    public struct Unenroll: RequestArguments {
        public var name: String
        public init(name: String) { self.name = name }
    }
}
