import ArgumentParser
import EnclaveClient
import EnclaveProtocol
import Foundation

struct Audit: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the audit log: who asked, which app, which policy, what happened. Never secrets."
    )
    @OptionGroup var client: ClientOptions
    @Option(help: "How many entries, newest first.") var limit = 20
    @Flag(help: "Print JSON.") var json = false
    @Flag(help: "Every app's entries (asks for the device passcode); default: lactl's own.") var all = false
    @Flag(help: "With --all: the daemon reads the passcode from standard input (else it asks on this terminal).")
    var stdin = false

    func run() throws {
        let request = Request.audit(.init(limit: limit, everyApp: all))
        guard case .audit(let entries) = try (all ? client.administer(request, stdin: stdin) : client.call(request))
        else { throw ExitCode.failure }
        if json { return printJSON(entries) }
        let f = ISO8601DateFormatter()
        for e in entries {
            let policy = e.policy.flatMap { PolicyValue(rawValue: $0)?.name } ?? ""
            print(
                "\(f.string(from: e.time))  uid \(e.uid)  pid \(e.pid)  \(Printable.field(e.operation)) \(policy)  → \(Printable.field(e.result))  [\(Printable.field(e.app))]"
            )
        }
    }
}

struct Admin: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Administration: lift a disabled passcode, lock biometrics remotely.",
        subcommands: [ResetPasscode.self, RemoteLock.self]
    )

    struct ResetPasscode: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset-passcode",
            abstract:
                "Clear the passcode failure counter and delays: root, or in user mode the person with the login password (the daemon asks for it)."
        )
        @OptionGroup var client: ClientOptions
        @Flag(help: "User mode: the daemon reads the login password from standard input.") var stdin = false
        @Option(
            help:
                "The user (root only): whose counter the system daemon resets; without a system daemon, the user whose own daemon (/run/user/UID/laenclaved/socket) root reaches."
        ) var uid: UInt32?
        func run() throws {
            if getuid() == 0, let path = userDaemonSocket() {
                // Root reaching a user's own daemon, which runs as that user: trusted for this
                // request, which carries nothing secret.
                var owner = stat()
                let extra: Set<UInt32> =
                    stat((path as NSString).deletingLastPathComponent, &owner) == 0 ? [owner.st_uid] : []
                _ = try client.call(
                    .resetPasscodeLockout(.init(uid: uid)),
                    on: { try EnclaveConnection(socketPath: path, alsoTrusting: extra) }
                )
            } else if getuid() == 0 {
                _ = try client.call(.resetPasscodeLockout(.init(uid: uid)))
            } else if try client.connection().hello.mode == .system {
                _ = try client.call(.resetPasscodeLockout(.init(uid: uid)))  // refused: root's alone there
            } else {
                // The user's own daemon asks the person for the login password (never this process).
                _ = try client.administer(.resetPasscodeLockout(.init(uid: uid)), stdin: stdin)
            }
            print("passcode attempts reset")
        }

        /// The socket of a user-mode daemon root administers: the one named, or the user's when no
        /// system daemon runs.
        private func userDaemonSocket() -> String? {
            if let socket = client.socket { return socket == EnclavePaths.systemSocket ? nil : socket }
            guard let uid, !FileManager.default.fileExists(atPath: EnclavePaths.systemSocket) else { return nil }
            return EnclavePaths.userSocket(ofUser: uid)
        }
    }

    struct RemoteLock: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remote-lock",
            abstract: "Refuse biometrics until the passcode is entered."
        )
        @OptionGroup var client: ClientOptions
        @Option(help: "The user (system mode, root only).") var uid: UInt32?
        func run() throws {
            _ = try client.call(.remoteLock(.init(uid: uid)))
            print("biometrics locked until the passcode is entered")
        }
    }
}
