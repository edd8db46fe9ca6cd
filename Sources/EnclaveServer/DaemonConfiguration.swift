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
    /// Use the fingerprint reader fprintd serves (instead of a simulated sensor).
    public var fprintd = false
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
