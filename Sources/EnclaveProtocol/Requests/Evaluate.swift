extension Request {
    /// `evaluatePolicy` on a context: prompt screens (`prompt` replies) and one `evaluated` reply.
    public struct Evaluate: RequestArguments {
        public var context: String
        public var policy: Int
        public var options: EvaluationOptions
        public init(context: String, policy: Int, options: EvaluationOptions) {
            self.context = context
            self.policy = policy
            self.options = options
        }

        public func validate() throws(Failure) {
            try ArgumentChecks.context(context)
            _ = try ArgumentChecks.policy(policy)
            try options.validate()
        }
    }
}

extension EvaluationOptions {
    /// What an evaluation is given to show, and how long a match may be reused.
    public func validate() throws(Failure) {
        try ArgumentChecks.text(reason, "localizedReason", allowEmpty: false)
        try ArgumentChecks.text(cancelTitle, "localizedCancelTitle")
        try ArgumentChecks.text(fallbackTitle, "localizedFallbackTitle")
        guard reuseDuration.isFinite, reuseDuration >= 0 else {
            throw Failure(.invalidParameter, "touchIDAuthenticationAllowableReuseDuration must be a finite number ≥ 0")
        }
    }
}
