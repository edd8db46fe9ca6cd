import EnclaveClient
import EnclaveProtocol
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Counters are durable before the answer leaves the daemon: SIGKILL at random instants never
/// loses a failed attempt the client has been told about, and never lowers a counter.
final class CrashSafetyTests: XCTestCase {
    func testSIGKILLBetweenAFailedAttemptAndItsReplyNeverLosesTheAttempt() throws {
        let enclave = try TestEnclave()
        var generator = SystemRandomNumberGenerator()
        var told = 0, untold = 0
        for round in 0..<30 {
            let before = try enclave.status()
            if before.biometricFailures >= 3 || before.passcodeFailures >= 3 {
                // Keep clear of lockout and delays: a correct passcode resets both counters.
                try enclave.setPasscode("1234", current: "1234")
            }
            let start = try enclave.status()
            let biometric = round % 2 == 0
            let connection = try EnclaveConnection(socketPath: enclave.socketPath)
            let seen = FailureWitness()
            let policy = biometric ? PolicyValue.deviceOwnerAuthenticationWithBiometrics : .deviceOwnerAuthentication
            connection.send(.evaluate(context: "crash-\(round)", policy: policy.rawValue, options: .init(reason: "crash test")),
                            onEvent: { reply in
                                if case .prompt(let screen) = reply, screen.instruction.contains("no match") || screen.instruction.contains("Wrong passcode") {
                                    seen.mark()
                                }
                            }, completion: { _ in })
            try enclave.queue(biometric ? [.nomatch] : [.passcode("0000\(round)")])
            usleep(UInt32.random(in: 0...4000, using: &generator))
            enclave.kill()
            let wasTold = seen.value
            connection.close()
            try enclave.start()
            let after = try enclave.status()
            let (b0, b1) = biometric ? (start.biometricFailures, after.biometricFailures) : (start.passcodeFailures, after.passcodeFailures)
            XCTAssertGreaterThanOrEqual(b1, b0, "round \(round): a counter went down")
            XCTAssertLessThanOrEqual(b1, b0 + 1, "round \(round)")
            if wasTold {
                told += 1
                XCTAssertEqual(b1, b0 + 1, "round \(round): the client saw the failure but it was not persisted")
            } else {
                untold += 1
            }
        }
        print("SIGKILL rounds: \(told) killed after the client saw the failure, \(untold) before")
    }
}

private final class FailureWitness: @unchecked Sendable {
    private let lock = NSLock()
    private var seen = false
    func mark() { lock.withLock { seen = true } }
    var value: Bool { lock.withLock { seen } }
}
