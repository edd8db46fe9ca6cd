extension Request {
    /// `evaluateAccessControl`: every constraint of a `SecAccessControlCreateFlags` value, on the
    /// context, by the daemon's own reading of the flags (which flags combine is a rule the daemon
    /// checks: `AccessRequirement`). Answered like `evaluate`.
    public struct AuthorizeAccessControl: RequestArguments {
        public var context: String
        public var flags: AccessControlFlags
        public var options: EvaluationOptions
        public init(context: String, flags: AccessControlFlags, options: EvaluationOptions) {
            self.context = context
            self.flags = flags
            self.options = options
        }

        public func validate() throws(Failure) {
            try ArgumentChecks.context(context)
            try options.validate()
        }
    }
}
