import Foundation

extension Request {
    /// Deletes any of the user's items by persistent reference; the daemon asks for the passcode.
    public struct KeychainRemove: RequestArguments {
        public var persistentRef: Data
        public init(persistentRef: Data) { self.persistentRef = persistentRef }
    }
}
