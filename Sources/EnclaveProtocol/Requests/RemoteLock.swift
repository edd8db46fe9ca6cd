extension Request {
    /// Refuses biometrics until the passcode is entered, like Apple's remote-lock command.
    public struct RemoteLock: RequestArguments {
        public var uid: UInt32?
        public init(uid: UInt32? = nil) { self.uid = uid }
    }
}
