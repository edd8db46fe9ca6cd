import EnclaveClient
import EnclaveProtocol
import Foundation
import LocalAuthentication
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An isolated laenclaved for tests: its own temporary socket and state, a simulated sensor, a
/// passcode and enrolled identities, and a script of touches. Code under test uses the real
/// `LAContext` against the real rules — no protocol to mock.
///
/// ```swift
/// let enclave = try TestEnclave()
/// try enclave.queue(.match)
/// try await enclave.run {
///     let ok = try await LAContext().evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock")
/// }
/// ```
public final class TestEnclave: Sendable {
    public enum Sensor: String, Sendable {
        case touchID = "touchid"
        case faceID = "faceid"
        case none
    }

    public struct Configuration: Sendable {
        public var sensor: Sensor = .touchID
        /// The device passcode to set at start; nil leaves none.
        public var passcode: String? = "1234"
        /// Identities to enrol at start (needs a passcode).
        public var enrolled: [String] = ["right-index-finger"]
        /// Test daemons use scrypt's minimum cost so tests stay fast (laenclaved's default: 17).
        public var passcodeCost = 10
        /// Test daemons accept 4-character passcodes (like the default "1234"); laenclaved's own
        /// default for new passcodes is 6.
        public var passcodeMinimumLength = 4
        public var promptTimeout: Double = 60
        public var promptQueueTimeout: Double = 30
        public var contextLifetime: Double = 300
        /// Run the daemon in system mode (needs root to be meaningful: other users may connect).
        public var systemMode = false
        /// The laenclaved binary; default: `$LAENCLAVED_PATH`, beside this executable, or on PATH.
        public var daemonPath: String?
        /// Whether the daemon accepts scripted touches and passcodes: true (`--allow-simulation`, the
        /// default here, so tests can script the person whatever the sensor), false
        /// (`--no-simulation`), nil (the daemon's own default, as an installation has it).
        public var allowsSimulation: Bool? = true
        public var extraArguments: [String] = []
        /// The daemon's root (`--tpm`): `off` by default, so a test never seals to the machine's
        /// TPM; a TPM in tpm2-tss's syntax (a simulator the test started) to test the TPM root.
        public var tpm = "off"
        /// Added to the daemon's environment (e.g. `DBUS_SYSTEM_BUS_ADDRESS` for a private fprintd).
        public var environment: [String: String] = [:]
        public init() {}
    }

    public let configuration: Configuration
    public let directory: String
    public let socketPath: String
    public let stateDirectory: String
    public let logPath: String
    /// The running daemon's process and the connection this object controls it through.
    private struct Running {
        var pid: pid_t = 0
        var control: EnclaveConnection?
    }

    private let running = Mutex(Running())

    /// The endpoint `LAContext`s created inside `run` use: this daemon, headless prompts.
    public var endpoint: EnclaveEndpoint { EnclaveEndpoint(socketPath: socketPath, autostart: false, headless: true) }

    public var processID: pid_t { running.withLock { $0.pid } }

    public init(_ configuration: Configuration = Configuration()) throws {
        self.configuration = configuration
        var template = Array("/tmp/la-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw EnclaveClientError.unreachable("cannot create a temporary directory")
        }
        directory = String(cString: made)
        chmod(directory, 0o755)
        socketPath = directory + "/run/socket"
        stateDirectory = directory + "/state"
        logPath = directory + "/laenclaved.log"
        try start()
        if let passcode = configuration.passcode {
            try setPasscode(passcode)
            for name in configuration.enrolled { try enroll(name) }
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Process control

    public func start() throws {
        guard let daemon = configuration.daemonPath ?? DaemonLauncher.anyDaemonExecutable() else {
            throw EnclaveClientError.unreachable(
                "laenclaved not found; build it (swift build) or set \(EnclavePaths.daemonEnvironmentKey)"
            )
        }
        var args = [
            configuration.systemMode ? "--system" : "--user", "--socket", socketPath, "--state-dir", stateDirectory,
            "--key-file", directory + "/keys/master.key", "--config", directory + "/laenclaved.conf",
            "--simulated-sensor", configuration.sensor.rawValue, "--passcode-cost", String(configuration.passcodeCost),
            "--passcode-minimum-length", String(configuration.passcodeMinimumLength),
            "--prompt-timeout", String(configuration.promptTimeout), "--prompt-queue-timeout",
            String(configuration.promptQueueTimeout),
            "--context-lifetime", String(configuration.contextLifetime), "--log-file", logPath, "--log-level", "debug",
            // The kit's daemon is the test's: `administer` hands it the passcode through a pipe.
            "--exit-with-parent", "--administration-pipe", "--tpm", configuration.tpm,
        ]
        switch configuration.allowsSimulation {
        case true?: args.append("--allow-simulation")
        case false?: args.append("--no-simulation")
        case nil: break
        }
        args += configuration.extraArguments
        // This start's words only (a restart writes to the same file).
        unlink(errorOutputPath)
        let child = try DaemonLauncher.spawn(
            daemon,
            args,
            environment: configuration.environment,
            errorOutput: errorOutputPath
        )
        running.withLock { $0 = Running(pid: child, control: nil) }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let c = try? EnclaveConnection(socketPath: socketPath) {
                running.withLock { $0.control = c }
                return
            }
            var status: Int32 = 0
            if waitpid(child, &status, WNOHANG) == child {
                running.withLock { $0.pid = 0 }
                throw EnclaveClientError.unreachable(
                    "laenclaved exited during start; its last words: \(lastWords())"
                )
            }
            usleep(20_000)
        }
        throw EnclaveClientError.unreachable(
            "laenclaved did not open \(socketPath) within 20 s; its last words: \(lastWords())"
        )
    }

    /// Where the daemon's standard error goes until it opens its log (`--log-file`), which then
    /// takes standard error too (a fatal error's message, a crash's backtrace): what it says about
    /// its arguments and its first steps.
    public var errorOutputPath: String { directory + "/laenclaved.stderr" }

    /// The ends of the daemon's standard error and of its log (the directory goes with this object).
    private func lastWords() -> String {
        func tail(_ path: String) -> String {
            guard let data = FileManager.default.contents(atPath: path), !data.isEmpty else { return "none" }
            return String(decoding: data.suffix(4096), as: UTF8.self)
        }
        return "standard error: \(tail(errorOutputPath)); log: \(tail(logPath))"
    }

    /// SIGTERM (graceful) and wait.
    public func stop() { signalAndWait(SIGTERM) }

    /// SIGKILL: the daemon dies at whatever instant it is in.
    public func kill() { signalAndWait(SIGKILL) }

    /// SIGTERM, and whether the daemon stopped within `seconds`; if it did not, SIGKILL (a test
    /// of a daemon that could be held from stopping fails instead of hanging).
    public func stop(within seconds: Double) -> Bool {
        let (child, c) = running.withLock { r -> (pid_t, EnclaveConnection?) in
            defer { r = Running() }
            return (r.pid, r.control)
        }
        c?.close()
        guard child > 0 else { return true }
        Glibc.kill(child, SIGTERM)
        let deadline = Date().addingTimeInterval(seconds)
        var status: Int32 = 0
        while Date() < deadline {
            if waitpid(child, &status, WNOHANG) == child { return true }
            usleep(20_000)
        }
        Glibc.kill(child, SIGKILL)
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        return false
    }

    public func restart() throws {
        stop()
        try start()
    }

    private func signalAndWait(_ signal: Int32) {
        let (child, c) = running.withLock { r -> (pid_t, EnclaveConnection?) in
            defer { r = Running() }
            return (r.pid, r.control)
        }
        c?.close()
        guard child > 0 else { return }
        Glibc.kill(child, signal)
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
    }

    // MARK: Binding LAContext

    /// Runs `body` with every `LAContext` created inside it bound to this daemon.
    public func run<T>(isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async rethrows -> T
    {
        try await EnclaveEndpoint.$override.withValue(endpoint, operation: body, isolation: isolation)
    }

    /// Synchronous form of `run`.
    public func run<T>(_ body: () throws -> T) rethrows -> T {
        try EnclaveEndpoint.$override.withValue(endpoint) { try body() }
    }

    // MARK: The scripted person and the device

    public func connection() throws -> EnclaveConnection {
        if let c = running.withLock({ $0.control }), !c.closed { return c }
        let c = try EnclaveConnection(socketPath: socketPath)
        running.withLock { $0.control = c }
        return c
    }

    /// One request on the wire, for what the kit has no method for (`import EnclaveProtocol`).
    @discardableResult
    public func send(_ request: Request) throws -> Reply {
        let reply = try connection().request(request)
        if case .failure(let f) = reply { throw EnclaveClientError.failure(f) }
        return reply
    }

    /// Queues what the person will do, in order: touches, buttons, a typed passcode.
    public func queue(_ events: Event...) throws { try queue(events) }
    public func queue(_ events: [Event]) throws { try send(.simulate(.init(events: events.map(\.simulated)))) }
    public func clearQueue() throws { try send(.clearSimulated) }

    /// An administration request (`import EnclaveProtocol`) with the person's answers: the kit
    /// hands the daemon a pipe holding `secrets`, one per line, as a script's `--stdin` does — the
    /// daemon never takes a passcode from a request.
    @discardableResult
    public func administer(_ request: Request, secrets: [String]) throws -> Reply {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            throw EnclaveClientError.unreachable("no pipe: \(String(cString: strerror(errno)))")
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let text = Array(secrets.map { $0 + "\n" }.joined().utf8)
        let written = text.withUnsafeBytes { Glibc.write(ends[1], $0.baseAddress, $0.count) }
        close(ends[1])
        defer { close(ends[0]) }
        guard written == text.count else { throw EnclaveClientError.unreachable("could not write the secrets") }
        try connection().handOverSecretInput(ends[0])
        return try send(request)
    }

    public func enroll(_ name: String, passcode: String? = nil) throws {
        try administer(.enroll(.init(name: name)), secrets: [passcode ?? configuration.passcode ?? ""])
    }

    /// The enrolled identities' names, as the person sees them (with the passcode).
    public func enrolments(passcode: String? = nil) throws -> [String] {
        guard
            case .enrolments(let names) = try administer(
                .enrolments,
                secrets: [passcode ?? configuration.passcode ?? ""]
            )
        else {
            throw EnclaveClientError.protocolError("enrolments")
        }
        return names
    }

    public func unenroll(_ name: String, passcode: String? = nil) throws {
        try administer(.unenroll(.init(name: name)), secrets: [passcode ?? configuration.passcode ?? ""])
    }

    public func setPasscode(_ new: String, current: String? = nil) throws {
        if let current {
            try administer(.changePasscode, secrets: [current, new])
        } else {
            try administer(.setPasscode, secrets: [new])
        }
    }
    public func removePasscode(current: String) throws { try administer(.removePasscode, secrets: [current]) }
    public func remoteLock() throws { try send(.remoteLock(.init(uid: nil))) }
    public func resetPasscodeLockout() throws { try send(.resetPasscodeLockout(.init(uid: nil))) }

    public func status() throws -> Status {
        guard case .status(let s) = try send(.status) else { throw EnclaveClientError.protocolError("status") }
        return Status(s)
    }

    /// The daemon's log so far (for failure messages).
    public func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
}
