extension Request {
    /// What the scripted person does next (a simulated sensor's touches, keys on the prompt).
    public struct Simulate: RequestArguments {
        public var events: [SimulatedEvent]
        public init(events: [SimulatedEvent]) { self.events = events }
    }
}
