import ArgumentParser
import EnclaveProtocol
import Foundation

struct Audit: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the audit log: who asked, which app, which policy, what happened. Never secrets.")
    @OptionGroup var client: ClientOptions
    @Option(help: "How many entries, newest first.") var limit = 20
    @Flag(help: "Print JSON.") var json = false
    @Flag(help: "Every app's entries (asks for the device passcode); default: lactl's own.") var all = false
    @Flag(help: "With --all: read the passcode from standard input.") var stdin = false

    func run() throws {
        let passcode = all ? try SecretInput.read("Device passcode", fromStdin: stdin) : nil
        guard case .audit(let entries) = try client.call(.audit(limit: limit, passcode: passcode)) else { throw ExitCode.failure }
        if json { return printJSON(entries) }
        let f = ISO8601DateFormatter()
        for e in entries {
            let policy = e.policy.flatMap { PolicyValue(rawValue: $0)?.name } ?? ""
            print("\(f.string(from: e.time))  uid \(e.uid)  pid \(e.pid)  \(Printable.field(e.operation)) \(policy)  → \(Printable.field(e.result))  [\(Printable.field(e.app))]")
        }
    }
}

struct Admin: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Administration: lift a disabled passcode, lock biometrics remotely.",
                                                    subcommands: [ResetPasscode.self, RemoteLock.self])

    struct ResetPasscode: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "reset-passcode",
            abstract: "Clear the passcode failure counter and delays (root in system mode; the user in user mode).")
        @OptionGroup var client: ClientOptions
        @Option(help: "The user (system mode, root only).") var uid: UInt32?
        func run() throws {
            _ = try client.call(.resetPasscodeLockout(uid: uid))
            print("passcode attempts reset")
        }
    }

    struct RemoteLock: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remote-lock", abstract: "Refuse biometrics until the passcode is entered.")
        @OptionGroup var client: ClientOptions
        @Option(help: "The user (system mode, root only).") var uid: UInt32?
        func run() throws {
            _ = try client.call(.remoteLock(uid: uid))
            print("biometrics locked until the passcode is entered")
        }
    }
}
