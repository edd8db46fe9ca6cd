import EnclaveCore
import EnclaveProtocol
import Foundation

@testable import EnclaveServer

extension DaemonConfiguration {
    /// A user-mode daemon for in-process tests: its files under `directory`, a simulated Touch ID,
    /// simulation on, scrypt at `passcodeCost`, 4-character passcodes accepted (as the testing
    /// kit's daemons).
    static func inProcess(
        _ directory: String,
        passcodeCost: Int = 10,
        passcodeMinimumLength: Int = 4
    ) -> DaemonConfiguration {
        var config = DaemonConfiguration(
            mode: .user,
            socketPath: directory + "/socket",
            stateDirectory: directory + "/state",
            masterKeyPath: directory + "/keys/master.key",
            simulatedSensor: .touchID,
            simulationEnabled: true
        )
        config.passcodeCost = passcodeCost
        config.passcodeMinimumLength = passcodeMinimumLength
        // The machine's TPM is not the test's: tests that need one start a simulator.
        config.tpm = .off
        return config
    }
}

extension EnclaveDaemon {
    /// Redeems `ticket` (a `secretInput` handoff ticket this process asked for) with a pipe holding
    /// `secrets`, one per line, as the handoff socket would.
    func handOver(secrets: [String], ticket: Data) throws {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw Failure(.internalError, "no pipe") }
        let text = Array(secrets.map { $0 + "\n" }.joined().utf8)
        let written = text.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) }
        close(ends[1])
        guard written == text.count,
            case .success(let redeemed) = handoff.redeem(ticket, by: .init(uid: getuid(), pid: getpid()))
        else {
            close(ends[0])
            throw Failure(.internalError, "the secrets were not handed over")
        }
        guard redeemed.destination.receive(.secretInput, ends[0]) else {
            close(ends[0])
            throw Failure(.internalError, "the connection did not take the pipe")
        }
    }
}
