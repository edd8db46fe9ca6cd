extension Request {
    /// `canEvaluatePolicy` on a context.
    public struct CanEvaluate: RequestArguments {
        public var context: String
        public var policy: Int
        public init(context: String, policy: Int) {
            self.context = context
            self.policy = policy
        }

        public func validate() throws(Failure) {
            try ArgumentChecks.context(context)
            _ = try ArgumentChecks.policy(policy)
        }
    }
}
