extension Request {
    /// `LAContext.invalidate()`: what runs on the context ends, and it is never valid again.
    public struct Invalidate: RequestArguments {
        public var context: String
        public init(context: String) { self.context = context }

        public func validate() throws(Failure) { try ArgumentChecks.context(context) }
    }
}
