extension Request {
    /// The enrolment's state hash for the calling app (`evaluatedPolicyDomainState`).
    public struct DomainState: RequestArguments {
        public var context: String?
        public init(context: String? = nil) { self.context = context }
    }
}
