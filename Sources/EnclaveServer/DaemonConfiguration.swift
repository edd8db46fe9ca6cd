import EnclaveCore
import EnclaveProtocol

public struct DaemonConfiguration: Sendable {
    public var mode: DaemonMode
    public var socketPath: String
    public var stateDirectory: String
    /// The master key of keychain encryption, kept outside the state directory so that a copy of
    /// the state alone decrypts nothing. Created (0600, directory 0700) when missing.
    public var masterKeyPath: String
    /// The simulated sensor, if any. In system mode it runs only when explicitly enabled.
    public var simulatedSensor: BiometryKind?
    /// The PAM service that checks the device passcode as the user's login password; nil: the
    /// daemon's own passcode (set with `lactl passcode set`).
    public var pamService: String?
    /// The users whose passcode is their login password; nil: every user (when `pamService` is set).
    public var pamUsers: Set<String>?
    /// Whether to use the fingerprint reader fprintd serves. `ifAvailable` (the `auto` sensor) falls
    /// back to `simulatedSensor` when fprintd has no reader.
    public var fprintd: FprintdUse = .no
    public enum FprintdUse: Sendable { case no, required, ifAvailable }
    /// Whether `simulate` requests (scripted touches and typed passcodes) are accepted.
    public var simulationEnabled: Bool
    /// scrypt cost (log2 N) for new passcode verifiers.
    public var passcodeCost: Int = PasscodeVerifier.defaultCost
    /// How long one prompt may stay open before it ends with `systemCancel`.
    public var promptTimeout: Double = 300
    /// How long a second evaluation of the same user waits for the prompt before `systemCancel`.
    public var promptQueueTimeout: Double = 30
    /// How long a successfully evaluated `LAContext` stays authorized.
    public var contextLifetime: Double = ContextAuthorization.defaultLifetime

    public init(mode: DaemonMode, socketPath: String, stateDirectory: String, masterKeyPath: String, simulatedSensor: BiometryKind?, simulationEnabled: Bool) {
        self.mode = mode; self.socketPath = socketPath; self.stateDirectory = stateDirectory; self.masterKeyPath = masterKeyPath
        self.simulatedSensor = simulatedSensor; self.simulationEnabled = simulationEnabled
    }
}
