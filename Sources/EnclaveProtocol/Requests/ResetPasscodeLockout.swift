extension Request {
    /// Clears the passcode-disabled state and its counters: root; in user mode also the person,
    /// with the login password the daemon asks for (`AdminPolicy.passcodeLockoutReset`).
    public struct ResetPasscodeLockout: RequestArguments {
        public var uid: UInt32?
        public init(uid: UInt32? = nil) { self.uid = uid }
    }
}
