import ArgumentParser
import EnclaveClient

@main
struct LACtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lactl",
        abstract: "Control laenclaved: status, passcode, enrolment, simulated touches, authentication, audit.",
        subcommands: [
            Status.self, Passcode.self, Enroll.self, Enrolments.self, Unenroll.self, Simulate.self, Authenticate.self,
            Keychain.self, Audit.self, Admin.self, AttestationRoot.self, Doctor.self, Demo.self,
        ]
    )

    static func main() {
        // lactl says why the daemon is unavailable in its own error, once.
        DaemonDiagnostics.writesToStandardError = false
        main(nil)
    }
}
