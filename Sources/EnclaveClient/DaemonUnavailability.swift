import EnclaveProtocol
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Why no laenclaved serves this process, said as a person needs it: what was looked for, why it
/// failed or was refused, and the one command that fixes it. `EnclaveConnections.shared` throws it
/// (as `EnclaveClientError.unavailable`) and reports it through `DaemonDiagnostics`.
public struct DaemonUnavailability: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was looked for: the socket, and which daemon it belongs to.
    public var sought: String
    /// Why nothing there serves this process.
    public var reason: String
    /// The command (or the one step) that makes it work.
    public var fix: String

    public init(sought: String, reason: String, fix: String) {
        self.sought = sought
        self.reason = reason
        self.fix = fix
    }

    /// One line: what, why, and what to do.
    public var description: String { "no laenclaved for this process: \(sought): \(reason). Fix: \(fix)" }
}

extension DaemonUnavailability {
    /// Whose socket an endpoint names, decided once for what is said and what fixes it.
    private enum Whose {
        case system, environment, userDaemon, given

        init(_ endpoint: EnclaveEndpoint) {
            if endpoint.socketPath == EnclavePaths.systemSocket {
                self = .system
            } else if EnclavePaths.processVariable(EnclavePaths.socketEnvironmentKey) == endpoint.socketPath {
                self = .environment
            } else if endpoint.autostart {
                self = .userDaemon
            } else {
                self = .given
            }
        }
    }

    /// The socket `endpoint` names, and whose it is, as a person reads it.
    static func sought(_ endpoint: EnclaveEndpoint) -> String {
        let path = endpoint.socketPath
        switch Whose(endpoint) {
        case .system: return "the system daemon's socket \(path)"
        case .environment: return "\(path) (named by $\(EnclavePaths.socketEnvironmentKey))"
        case .userDaemon: return "the user daemon's socket \(path) (started on demand)"
        case .given: return "the socket \(path)"
        }
    }

    /// Nothing listens where no daemon may be started.
    static func nothingListens(_ endpoint: EnclaveEndpoint, _ error: String) -> DaemonUnavailability {
        let path = endpoint.socketPath
        let fix: String
        switch Whose(endpoint) {
        case .system:
            fix = "sudo systemctl start laenclaved.socket (journalctl -u laenclaved says why it stopped)"
        case .environment:
            fix =
                "start a daemon there (laenclaved --user --socket \(path) &), or unset \(EnclavePaths.socketEnvironmentKey) to use your own user daemon"
        case .userDaemon, .given:
            fix = "start a daemon there: laenclaved --user --socket \(path) &"
        }
        return DaemonUnavailability(sought: sought(endpoint), reason: "nothing answers there (\(error))", fix: fix)
    }

    /// The socket answers, but not as a daemon this process may trust or be served by.
    static func refused(_ endpoint: EnclaveEndpoint, _ error: EnclaveClientError) -> DaemonUnavailability {
        let here = sought(endpoint)
        switch error {
        case .untrustedDaemon(let path, let uid):
            return DaemonUnavailability(
                sought: here,
                reason:
                    "the process listening there runs as \(uid.map { "uid \($0)" } ?? "a user the kernel did not say"), "
                    + "neither this user nor root, so it is not trusted with a terminal or a secret",
                fix:
                    "stop that process and remove \(path), or point \(EnclavePaths.socketEnvironmentKey) at your own daemon's socket"
            )
        case .failure(let f) where f.code == .unsupportedVersion:
            return DaemonUnavailability(
                sought: here,
                reason: "the daemon refused this process: \(f.message)",
                fix: "restart the daemon from the same release as this app (lactl status names both versions)"
            )
        case .failure(let f):
            return DaemonUnavailability(
                sought: here,
                reason: "the daemon refused this process: \(f.message)",
                fix: "lactl doctor (it says which daemon serves you and what to change)"
            )
        case .connectionLost:
            return DaemonUnavailability(
                sought: here,
                reason: "the daemon closed the connection before greeting this process",
                fix:
                    "lactl doctor (and the daemon's log: laenclaved.log in your state directory, or journalctl -u laenclaved)"
            )
        default:
            return DaemonUnavailability(sought: here, reason: "\(error)", fix: "lactl doctor")
        }
    }
}

/// Where a daemon's unavailability is said. Our choice: once per process for each distinct
/// problem, as one line on standard error (an app that just added the package learns why every
/// call fails without reading our sources), and never per call; every later failure carries the
/// same line in its error (`LAError`'s message, `SecCopyErrorMessageString(errSecNotAvailable)`).
public enum DaemonDiagnostics {
    private struct State {
        var last: DaemonUnavailability?
        var said: Set<String> = []
        var writesToStandardError = true
        var write: @Sendable (String) -> Void = DaemonDiagnostics.writeToStandardError
    }

    private static let state = Mutex(State())

    /// Programs that print their own errors (lactl, the prompt agent) turn the line off.
    public static var writesToStandardError: Bool {
        get { state.withLock { $0.writesToStandardError } }
        set { state.withLock { $0.writesToStandardError = newValue } }
    }

    /// The last problem met since a daemon last answered, if any.
    public static var lastUnavailability: DaemonUnavailability? { state.withLock { $0.last } }

    /// Where the line goes: standard error, unless a test reads it instead. Returns the writer it replaced.
    @discardableResult
    package static func setWriter(_ write: @escaping @Sendable (String) -> Void) -> @Sendable (String) -> Void {
        state.withLock { s in
            defer { s.write = write }
            return s.write
        }
    }

    /// Forgets what was said (tests).
    package static func reset() {
        state.withLock {
            $0.last = nil
            $0.said = []
        }
    }

    static func report(_ problem: DaemonUnavailability) {
        let writer: (@Sendable (String) -> Void)? = state.withLock {
            $0.last = problem
            guard $0.writesToStandardError, $0.said.insert(problem.description).inserted else { return nil }
            return $0.write
        }
        // One line whatever a path or a daemon's message holds (newlines, terminal escapes).
        writer?("[LocalAuthentication] " + Printable.escaped(problem.description, singleLine: true))
    }

    static func connected() {
        state.withLock { $0.last = nil }
    }

    /// Best effort, never fatal: an app whose standard error is closed, a pipe nobody reads or a
    /// non-blocking descriptor still gets its `errSecNotAvailable`, not a crash (Foundation's
    /// `FileHandle.write` traps on a write error).
    @Sendable static func writeToStandardError(_ line: String) {
        guard fcntl(STDERR_FILENO, F_GETFD) != -1 else { return }
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }
}
