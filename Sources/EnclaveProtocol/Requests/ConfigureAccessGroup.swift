extension Request {
    /// Sets which apps (executable paths) share a keychain access group; no apps removes the
    /// group. The daemon asks for the passcode: only the person decides what apps share.
    public struct ConfigureAccessGroup: RequestArguments {
        public var name: String
        public var apps: [String]
        public init(name: String, apps: [String]) {
            self.name = name
            self.apps = apps
        }
    }
}
