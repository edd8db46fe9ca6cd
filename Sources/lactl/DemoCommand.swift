import ArgumentParser
import EnclaveClient
import EnclaveProtocol
import Foundation
import LocalAuthentication
import LocalAuthenticationTesting

#if canImport(Glibc)
import Glibc
#endif

struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A guided tour on a throw-away daemon: prompt, match, mismatch, lockout, passcode.",
        discussion: "On a terminal you press the keys yourself; without one (or with --auto) the touches are scripted."
    )

    @Flag(help: "Script every touch and key instead of asking you.") var auto = false
    @Option(help: "touchid or faceid.") var sensor: String = "touchid"

    func run() throws {
        let interactive = !auto && isatty(STDIN_FILENO) == 1 && open("/dev/tty", O_RDWR) >= 0
        var configuration = TestEnclave.Configuration()
        guard let kind = TestEnclave.Sensor(rawValue: sensor), kind != .none else {
            throw ValidationError("--sensor is touchid or faceid")
        }
        configuration.sensor = kind
        configuration.passcode = nil
        configuration.passcodeCost = 14
        let tour = try Tour(enclave: TestEnclave(configuration), interactive: interactive, faceID: kind == .faceID)
        try tour.play()
    }
}

private struct Tour {
    let enclave: TestEnclave
    let interactive: Bool
    let faceID: Bool
    let passcode = "1234"

    var sensorName: String { faceID ? "Face ID" : "Touch ID" }
    var endpoint: EnclaveEndpoint {
        EnclaveEndpoint(socketPath: enclave.socketPath, autostart: false, headless: !interactive)
    }

    func say(_ text: String) { print(text) }
    func heading(_ n: Int, _ title: String) {
        // Bold on a terminal; plain text in a file or a pipe.
        let (bold, plain) = isatty(STDOUT_FILENO) == 1 ? ("\u{1B}[1m", "\u{1B}[0m") : ("", "")
        Swift.print("\n\(bold)\(n). \(Printable.escaped(title))\(plain)")
    }

    func pause() {
        guard interactive else { return }
        print("   (press Enter to continue)", terminator: "")
        fflush(nil)
        _ = readLine()
    }

    /// Runs one evaluation; in auto mode the person's actions are queued first.
    func evaluate(
        _ policy: LAPolicy,
        reason: String,
        script: [TestEnclave.Event],
        keys: String
    ) throws -> (Bool, LAError?) {
        if interactive { say("   → at the prompt: \(keys)") } else { try enclave.queue(script) }
        let context = EnclaveEndpoint.$override.withValue(endpoint) { LAContext() }
        let result = evaluateSynchronously(context, policy, reason: reason)
        if result.0 {
            say("   ✔ evaluatePolicy succeeded")
        } else if let e = result.1 {
            say("   ✘ evaluatePolicy failed: LAError.\(e.code.name) (\(e.code.rawValue)) — \(e.localizedDescription)")
        }
        return result
    }

    func status() throws -> TestEnclave.Status { try enclave.status() }

    func failuresLine() throws -> String {
        let s = try status()
        return
            "consecutive failed matches: \(s.biometricFailures); biometry \(s.biometryLockout.map { "LOCKED (\($0))" } ?? "available")"
    }

    func play() throws {
        say(
            """
            A tour of LocalAuthentication on Linux. A private laenclaved is running for this tour only
            (socket \(enclave.socketPath)); it plays the Secure Enclave with a simulated \(sensorName) sensor.
            Your real state is not touched, and everything is removed at the end.
            """
        )
        if !interactive { say("(no terminal or --auto: the person's touches and keys are scripted)") }

        heading(1, "A device without a passcode")
        let context = EnclaveEndpoint.$override.withValue(endpoint) { LAContext() }
        var error: NSError?
        let can = context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)
        say(
            "   canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics) = \(can), error \(error?.code ?? 0): \(error?.localizedDescription ?? "-")"
        )
        say("   biometryType = .\(context.biometryType == .faceID ? "faceID" : "touchID")")
        pause()

        heading(2, "Set the device passcode and enrol an identity")
        try enclave.setPasscode(passcode)
        say("   lactl passcode set           → passcode \(passcode) (stored as an scrypt verifier, never in clear)")
        let identity = faceID ? "face" : "right-index-finger"
        try enclave.enroll(identity, passcode: passcode)
        say("   lactl enroll \(identity)   → enrolling needs the passcode in the same request")
        var error2: NSError?
        let can2 = context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error2)
        say(
            "   canEvaluatePolicy = \(can2); domainState.biometry.stateHash = \(context.domainState.biometry.stateHash?.base64EncodedString().prefix(16) ?? "nil")…"
        )
        pause()

        heading(3, "A matching \(faceID ? "face" : "finger")")
        _ = try evaluate(
            .deviceOwnerAuthenticationWithBiometrics,
            reason: "Unlock your notes",
            script: [.match],
            keys: "press Ctrl-T (a matching touch)"
        )
        pause()

        heading(4, "A stranger's \(faceID ? "face" : "finger")")
        if faceID {
            say("   Face ID tries twice per request: after a miss the person may try again.")
            _ = try evaluate(
                .deviceOwnerAuthenticationWithBiometrics,
                reason: "Unlock your notes",
                script: [.nomatch, .retry, .nomatch, .cancel],
                keys: "Ctrl-N, then Ctrl-R (Try Again), Ctrl-N again, then Esc"
            )
        } else {
            say("   Touch ID allows 3 attempts per request, then fails with authenticationFailed.")
            _ = try evaluate(
                .deviceOwnerAuthenticationWithBiometrics,
                reason: "Unlock your notes",
                script: [.nomatch, .nomatch, .nomatch],
                keys: "press Ctrl-N (a non-matching touch) three times"
            )
        }
        say("   \(try failuresLine())")
        pause()

        heading(5, "Lockout after 5 consecutive failures")
        // Face ID stops after two misses per request, so reaching five may take several requests.
        for _ in 0..<4 where try status().biometryLockout == nil {
            let remaining = 5 - (try status().biometricFailures)
            let strangers: [TestEnclave.Event] =
                faceID
                ? (remaining >= 2 ? [.nomatch, .retry, .nomatch, .cancel] : [.nomatch])
                : Array(repeating: .nomatch, count: min(remaining, 3))
            _ = try evaluate(
                .deviceOwnerAuthenticationWithBiometrics,
                reason: "Unlock your notes",
                script: strangers,
                keys: faceID
                    ? "Ctrl-N, Ctrl-R (Try Again), Ctrl-N, and Esc if the prompt stays"
                    : "press Ctrl-N until the prompt closes"
            )
        }
        say("   \(try failuresLine())")
        var error3: NSError?
        let can3 = context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error3)
        say("   canEvaluatePolicy = \(can3), error \(error3?.code ?? 0): \(error3?.localizedDescription ?? "-")")
        let environment = EnclaveEndpoint.$override.withValue(endpoint) { LAEnvironment.currentUser.state }
        say(
            "   LAEnvironment: biometry.isLockedOut = \(environment.biometry?.isLockedOut ?? false) — visible without a prompt"
        )
        pause()

        heading(6, "The passcode lifts the lockout")
        say("   .deviceOwnerAuthentication goes straight to the passcode while biometry is locked.")
        _ = try evaluate(
            .deviceOwnerAuthentication,
            reason: "Unlock your notes",
            script: [.passcode("0000"), .passcode(passcode)],
            keys: "type 0000 + Enter (wrong), then \(passcode) + Enter"
        )
        say("   \(try failuresLine())")
        pause()

        heading(7, "Cancel")
        _ = try evaluate(.deviceOwnerAuthentication, reason: "Delete everything", script: [.cancel], keys: "press Esc")
        pause()

        heading(8, "An enrolment change is visible to apps")
        let before = context.domainState.biometry.stateHash
        try enclave.enroll(faceID ? "second-look" : "left-thumb", passcode: passcode)
        let after = context.domainState.biometry.stateHash
        say(
            "   domain state before: \(before?.base64EncodedString().prefix(16) ?? "nil")…  after: \(after?.base64EncodedString().prefix(16) ?? "nil")…  changed: \(before != after)"
        )
        say("   (keychain items made with .biometryCurrentSet become unusable at this point)")

        say("\nThat was the tour. Next: `lactl status`, `lactl authenticate --reason \"…\"`, and the README.")
    }
}
