import Foundation

/// Everything the client keeps between launches, in one JSON file (0600, directory 0700). The
/// private key is not here: `keyBlob` is the Secure Enclave key's sealed blob, usable only
/// through laenclaved by this app.
public struct ClientState: Codable, Equatable, Sendable {
    public struct Binding: Codable, Equatable, Sendable {
        public var credentialID: Data
        public var keyBlob: Data
        /// The biometric domain state when fingerprint login was enabled.
        public var domainState: Data?
        public var signCount: UInt32
        public init(credentialID: Data, keyBlob: Data, domainState: Data?, signCount: UInt32) {
            self.credentialID = credentialID
            self.keyBlob = keyBlob
            self.domainState = domainState
            self.signCount = signCount
        }
    }

    public struct SavedSession: Codable, Equatable, Sendable {
        public var token: String
        public var expiresAt: Double
        public var method: String
        public init(token: String, expiresAt: Double, method: String) {
            self.token = token
            self.expiresAt = expiresAt
            self.method = method
        }
    }

    public var facts = LoginFacts()
    public var binding: Binding?
    public var session: SavedSession?
    /// The server's client token for this client, by username (`SessionResponse.clientToken`):
    /// sent with each password login, so that others' wrong guesses at the name do not lock it out.
    public var clientTokens: [String: String]?
    public init() {}
}

/// Loads and saves `ClientState` atomically (write to a temporary file, fsync, rename).
public struct ClientStateFile: Sendable {
    public let path: String

    public init(directory: String) { path = directory + "/state.json" }

    public func load() throws -> ClientState {
        guard FileManager.default.fileExists(atPath: path) else { return ClientState() }
        do {
            return try JSONDecoder().decode(ClientState.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw ClientError(.stateFile, "The state file \(path) is damaged (\(error)); remove it to start over.")
        }
    }

    public func save(_ state: ClientState) throws {
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(
            atPath: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(state)
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]),
            let handle = FileHandle(forWritingAtPath: temporary)
        else { throw ClientError(.stateFile, "cannot write \(temporary)") }
        try handle.synchronize()
        try handle.close()
        guard rename(temporary, path) == 0 else {
            throw ClientError(.stateFile, "cannot replace \(path): \(String(cString: strerror(errno)))")
        }
    }
}
