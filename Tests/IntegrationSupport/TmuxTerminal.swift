import EnclaveClient
import Foundation
import LocalAuthenticationTesting
import XCTest

/// A real terminal for a test: a tmux session on a tmux server of its own (`-L`), running one
/// shell command in a pseudo-terminal whose foreground it is. The test reads the screen
/// (`capture-pane`) and types (`send-keys`) as a person at that terminal would.
public final class TmuxTerminal {
    public static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux") }

    /// The tmux server's socket name (`tmux -L`): another client may attach to session "t" there.
    public let server = "la-test-\(getpid())-\(UUID().uuidString.prefix(8))"
    private var running = false
    /// Whose tmux it is: this process's user, or another one (a person's terminal beside a system daemon).
    private let user: (uid: uid_t, gid: gid_t)?

    /// Starts `command` (run by /bin/sh) in a 160×50 terminal. `user`: the terminal (its tmux
    /// server, its pseudo-terminal and the command) belongs to that user, with only `PATH`, `HOME`
    /// (/tmp) and `SHELL` of the environment (this process must be root).
    public init(_ command: String, environment: [String: String] = [:], user: (uid: uid_t, gid: gid_t)? = nil) throws {
        self.user = user
        var arguments = ["new-session", "-d", "-s", "t", "-x", "160", "-y", "50"]
        for (key, value) in environment { arguments += ["-e", "\(key)=\(value)"] }
        arguments.append(command)
        guard try tmux(arguments) == 0 else { throw TmuxError(description: "tmux new-session failed") }
        running = true
    }

    deinit { stop() }

    /// What the terminal shows now, lines joined where tmux wrapped them.
    public func screen() -> String {
        let path = NSTemporaryDirectory() + "tmux-screen-\(UUID().uuidString)"
        defer { unlink(path) }
        _ = try? tmux(["capture-pane", "-J", "-t", "t", ";", "save-buffer", path, ";", "delete-buffer"])
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    /// Types `text` literally.
    public func type(_ text: String) throws { _ = try tmux(["send-keys", "-t", "t", "-l", text]) }

    /// Presses keys by tmux's names: "Enter", "Escape", "C-c", "C-f"…
    public func press(_ keys: String...) throws { _ = try tmux(["send-keys", "-t", "t"] + keys) }

    /// Waits until the screen contains `text`; fails the test with the screen otherwise.
    public func waitFor(_ text: String, timeout: Double = 20, file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if screen().contains(text) { return }
            usleep(50_000)
        }
        XCTFail("the terminal never showed \"\(text)\"; it shows:\n\(screen())", file: file, line: line)
    }

    /// Ends the session and its server: the pseudo-terminal closes (a hang-up for what runs in it).
    public func stop() {
        guard running else { return }
        running = false
        _ = try? tmux(["kill-server"])
    }

    /// Runs a tmux client, with no descriptor of ours: the first one forks the tmux server, which
    /// would keep any pipe it inherited (Foundation's Process waits on one until the server ends).
    /// In a session of its own (`setsid`), with no controlling terminal: a command client, never
    /// one a person attached (which the daemon's multiplexer check counts).
    private func tmux(_ arguments: [String]) throws -> Int32 {
        var environment = ProcessInfo.processInfo.environment
        // The session must not inherit LA_PROMPT=headless from the test run.
        environment["LA_PROMPT"] = nil
        let command = ["-L", server, "-f", "/dev/null"] + arguments
        let pid =
            if let user {
                try DaemonLauncher.spawn(
                    "/usr/bin/setpriv",
                    [
                        "--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "--", "/usr/bin/setsid", "-w",
                        "/usr/bin/tmux",
                    ]
                        + command,
                    environment: ["PATH": "/usr/bin:/bin", "HOME": "/tmp", "SHELL": "/bin/sh"],
                    inherit: false
                )
            } else {
                try DaemonLauncher.spawn(
                    "/usr/bin/setsid",
                    ["-w", "/usr/bin/tmux"] + command,
                    environment: environment,
                    inherit: false
                )
            }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status
    }

    public struct TmuxError: Error, CustomStringConvertible { public var description: String }
}

/// A shell command run in a `TmuxTerminal`, its standard output, standard error and exit status
/// kept in files of `directory` (the terminal shows only what the daemon draws there).
public struct TerminalCommand {
    public let terminal: TmuxTerminal
    private let directory: String

    /// `lactl ARGUMENTS` against `enclave`'s daemon, its files in the daemon's directory.
    public static func lactl(
        _ arguments: String,
        on enclave: TestEnclave,
        ignoringHangUp: Bool = false
    ) throws -> TerminalCommand {
        try TerminalCommand(
            "'\(productPath("lactl"))' \(arguments) --socket '\(enclave.socketPath)'",
            in: enclave.directory,
            ignoringHangUp: ignoringHangUp
        )
    }

    /// `ignoringHangUp`: the command outlives its terminal (`trap '' HUP`), to see what it hears when the terminal goes.
    /// `user`: the terminal is that user's (`TmuxTerminal`), who must be able to write into `directory`.
    public init(
        _ command: String,
        in directory: String,
        ignoringHangUp: Bool = false,
        user: (uid: uid_t, gid: gid_t)? = nil
    ) throws {
        self.directory = directory
        let trap = ignoringHangUp ? "trap '' HUP; " : ""
        terminal = try TmuxTerminal(
            "\(trap)\(command) > '\(directory)/out' 2> '\(directory)/err'; echo $? > '\(directory)/status'; sleep 60",
            user: user
        )
    }

    /// The command's exit status once it has ended (nil if it did not within `timeout` seconds).
    public func exitStatus(timeout: Double = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: directory + "/status", encoding: .utf8),
                let n = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                return n
            }
            usleep(50_000)
        }
        return nil
    }

    public var output: String { (try? String(contentsOfFile: directory + "/out", encoding: .utf8)) ?? "" }
    public var errors: String { (try? String(contentsOfFile: directory + "/err", encoding: .utf8)) ?? "" }
}
