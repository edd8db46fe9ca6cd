extension Request {
    /// The caller's audit entries, newest first; `everyApp`: those of all the user's apps (the
    /// daemon asks for the passcode). Both may be left out (50, the calling app's).
    public struct Audit: RequestArguments {
        public var limit: Int
        public var everyApp: Bool
        public init(limit: Int = 50, everyApp: Bool = false) {
            self.limit = limit
            self.everyApp = everyApp
        }

        private enum CodingKeys: String, CodingKey { case limit, everyApp }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            limit = try c.decodeIfPresent(Int.self, forKey: .limit) ?? 50
            everyApp = try c.decodeIfPresent(Bool.self, forKey: .everyApp) ?? false
        }
    }
}
