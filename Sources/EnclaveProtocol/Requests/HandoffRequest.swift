extension Request {
    /// A one-time ticket to hand the daemon a descriptor on its handoff socket
    /// (`EnclavePaths.handoffSocket`): the terminal the daemon draws its prompt on, or the pipe a
    /// script hands secrets through. Answered with `handoffTicket`. There is no request that
    /// carries the person's keys: the daemon reads them from the handed terminal itself, so the
    /// passcode never passes through the app.
    public struct Handoff: RequestArguments {
        public var kind: HandedDescriptor
        public init(kind: HandedDescriptor) { self.kind = kind }
    }
}
