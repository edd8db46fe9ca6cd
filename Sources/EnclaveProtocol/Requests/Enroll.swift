import Foundation

extension Request {
    /// Enrols a new identity (the daemon asks for the passcode); a real reader's stages come back
    /// as `enrollProgress` replies before the final `ok`.
    public struct Enroll: RequestArguments {
        public var name: String
        public init(name: String) { self.name = name }

        /// An identity's name, as the person reads it back in `lactl` and the enrolled list.
        public func validate() throws(Failure) {
            guard !name.isEmpty, name.utf8.count <= 64,
                name.unicodeScalars.allSatisfy({
                    CharacterSet.alphanumerics.contains($0) || "-_. ".unicodeScalars.contains($0)
                })
            else {
                throw Failure(
                    .invalidParameter,
                    "an identity name has 1 to 64 letters, digits, spaces, '-', '_' or '.'"
                )
            }
        }
    }
}
