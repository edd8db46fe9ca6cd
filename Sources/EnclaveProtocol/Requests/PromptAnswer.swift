extension Request {
    /// The prompt agent's answer to a screen it shows (only the serving agent's connection may
    /// send it).
    public struct PromptAnswer: RequestArguments {
        public var prompt: UInt64
        public var action: PromptAction
        public init(prompt: UInt64, action: PromptAction) {
            self.prompt = prompt
            self.action = action
        }
    }
}
