import ArgumentParser
import EnclaveProtocol
import Foundation

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the sensor, enrolment, lockout, counters, delays and domain state of the calling user."
    )

    @OptionGroup var client: ClientOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        guard case .status(let s) = try client.call(.status) else { throw ExitCode.failure }
        if json { return printJSON(s) }
        print("user          uid \(s.uid), \(s.mode.rawValue)-mode daemon")
        if let sensor = s.sensor {
            print(
                "sensor        \(Printable.field(sensor.name))\(sensor.simulated ? "  ⚠ SIMULATED: touches can be scripted" : "")"
            )
            if sensor.simulated && s.mode == .system {
                // A system daemon guards every user of the machine: say it where nobody can miss it.
                printError(
                    """
                    ⚠⚠ WARNING: this SYSTEM daemon uses a SIMULATED \(sensor.kind.displayName) sensor\(s.simulationEnabled ? " and accepts scripted input" : "").
                    ⚠⚠ Anyone who can queue events passes biometric checks. Use sensor = fprintd (or auto) in \(EnclavePaths.systemConfiguration).
                    """
                )
            }
            if !sensor.simulated && s.simulationEnabled {
                printError(
                    """
                    ⚠⚠ WARNING: this daemon accepts scripted touches and passcodes with a REAL fingerprint reader:
                    ⚠⚠ `lactl simulate` passes its prompts. Remove allow-simulation / --allow-simulation unless this machine is for testing.
                    """
                )
            }
        } else {
            print("sensor        none")
        }
        print(
            "enrolled      \(s.enrolledCount == 0 ? "nothing" : "\(s.enrolledCount) identit\(s.enrolledCount == 1 ? "y" : "ies") (names: lactl enrolments)")"
        )
        print("passcode      \(s.passcodeSet ? "set" : "not set")")
        print(
            "biometry      \(s.biometryLockout.map { "LOCKED (\($0)) — enter the passcode to unlock" } ?? "available"), \(s.biometricFailures) consecutive failed match(es)"
        )
        var passcode = "\(s.passcodeFailures) consecutive failure(s)"
        if s.passcodeDisabled { passcode += ", DISABLED until an administrator resets it" }
        if let after = s.passcodeRetryAfter { passcode += ", next attempt in \(describeSeconds(after))" }
        print("passcode try  \(passcode)")
        print(
            "domain state  \(s.domainState.map { $0.base64EncodedString() } ?? "nil") (for \(Printable.field(s.app)))"
        )
        switch s.root {
        case .tpm?: print("root          TPM 2.0 (a copy of the state and key file opens nothing without that TPM)")
        case .software?:
            print("root          software (the key file: a copy of the state and key file opens it anywhere)")
        default: break
        }
        if let refused = s.stateRefused { print("state         REFUSED: \(Printable.field(refused))") }
        if s.promptOpen { print("prompt        open") }
        if s.promptAgent == true { print("prompt agent  laenclaved-agent draws this session's prompts") }
        if s.simulationEnabled { print("simulation    enabled, \(s.queuedEvents) event(s) queued") }
    }
}
