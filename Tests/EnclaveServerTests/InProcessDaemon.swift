import EnclaveCore
import EnclaveProtocol
@testable import EnclaveServer

extension DaemonConfiguration {
    /// A user-mode daemon for in-process tests: its files under `directory`, a simulated Touch ID,
    /// simulation on, scrypt at `passcodeCost`, 4-character passcodes accepted (as the testing
    /// kit's daemons).
    static func inProcess(_ directory: String, passcodeCost: Int = 10, passcodeMinimumLength: Int = 4) -> DaemonConfiguration {
        var config = DaemonConfiguration(mode: .user, socketPath: directory + "/socket", stateDirectory: directory + "/state",
                                         masterKeyPath: directory + "/keys/master.key", simulatedSensor: .touchID, simulationEnabled: true)
        config.passcodeCost = passcodeCost
        config.passcodeMinimumLength = passcodeMinimumLength
        return config
    }
}
