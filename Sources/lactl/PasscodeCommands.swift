import ArgumentParser
import EnclaveProtocol
import Foundation

struct Passcode: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set, change or remove the device passcode.",
        subcommands: [Set.self, Change.self, Remove.self]
    )

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Set the device passcode (when none is set).")
        @OptionGroup var client: ClientOptions
        @Flag(
            help:
                "The daemon reads the new passcode from the first line of standard input (else it asks on this terminal)."
        ) var stdin = false
        func run() throws {
            _ = try client.administer(.setPasscode, stdin: stdin)
            print("passcode set")
        }
    }

    struct Change: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change the device passcode.")
        @OptionGroup var client: ClientOptions
        @Flag(help: "The daemon reads the current and the new passcode from the first two lines of standard input.")
        var stdin = false
        func run() throws {
            _ = try client.administer(.changePasscode, stdin: stdin)
            print("passcode changed")
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove the device passcode, and with it every enrolled identity."
        )
        @OptionGroup var client: ClientOptions
        @Flag(help: "The daemon reads the current passcode from standard input.") var stdin = false
        func run() throws {
            _ = try client.administer(.removePasscode, stdin: stdin)
            print("passcode removed; enrolled identities removed")
        }
    }
}

struct Enroll: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Enrol a finger or face (needs the device passcode).")
    @OptionGroup var client: ClientOptions
    @Argument(help: "A name for the identity, e.g. right-index-finger.") var name: String
    @Flag(help: "The daemon reads the passcode from standard input.") var stdin = false
    func run() throws {
        // A real reader reports each stage: a progress bar, redrawn in place on a terminal.
        let terminal = isatty(STDOUT_FILENO) == 1
        _ = try client.administer(
            .enroll(.init(name: name)),
            stdin: stdin,
            onEvent: { reply in
                guard case .enrollProgress(let p) = reply else { return }
                let width = 20
                let filled = p.stages > 0 ? min(width, width * p.stage / p.stages) : 0
                let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
                let line = "\(bar) stage \(min(p.stage + 1, p.stages)) of \(p.stages): \(p.message)"
                if terminal { Swift.print("\r\u{1B}[K" + Printable.field(line), terminator: "") } else { print(line) }
                fflush(nil)
            }
        )
        if terminal { print("") }
        print("enrolled \(name)")
    }
}

struct Enrolments: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the names of the enrolled identities (needs the device passcode)."
    )
    @OptionGroup var client: ClientOptions
    @Flag(help: "The daemon reads the passcode from standard input.") var stdin = false
    @Flag(help: "Print JSON.") var json = false
    func run() throws {
        guard case .enrolments(let names) = try client.administer(.enrolments, stdin: stdin) else {
            throw ExitCode.failure
        }
        if json { return printJSON(names) }
        if names.isEmpty { print("nothing enrolled") }
        for name in names { print(Printable.field(name)) }
    }
}

struct Unenroll: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove an enrolled identity (needs the device passcode)."
    )
    @OptionGroup var client: ClientOptions
    @Argument(help: "The identity's name.") var name: String
    @Flag(help: "The daemon reads the passcode from standard input.") var stdin = false
    func run() throws {
        _ = try client.administer(.unenroll(.init(name: name)), stdin: stdin)
        print("removed \(name)")
    }
}
