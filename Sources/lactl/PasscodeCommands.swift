import ArgumentParser
import EnclaveProtocol
import Foundation

struct Passcode: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Set, change or remove the device passcode.",
                                                    subcommands: [Set.self, Change.self, Remove.self])

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Set the device passcode (when none is set).")
        @OptionGroup var client: ClientOptions
        @Flag(help: "Read the new passcode from the first line of standard input.") var stdin = false
        func run() throws {
            let new = try SecretInput.read("New passcode", fromStdin: stdin)
            if !stdin, try SecretInput.read("Repeat the new passcode", fromStdin: false) != new { throw ValidationError("the passcodes differ") }
            _ = try client.call(.setPasscode(current: nil, new: new))
            print("passcode set")
        }
    }

    struct Change: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change the device passcode.")
        @OptionGroup var client: ClientOptions
        @Flag(help: "Read the current and the new passcode from the first two lines of standard input.") var stdin = false
        func run() throws {
            let current = try SecretInput.read("Current passcode", fromStdin: stdin)
            let new = try SecretInput.read("New passcode", fromStdin: stdin)
            _ = try client.call(.setPasscode(current: current, new: new))
            print("passcode changed")
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove the device passcode, and with it every enrolled identity.")
        @OptionGroup var client: ClientOptions
        @Flag(help: "Read the current passcode from standard input.") var stdin = false
        func run() throws {
            let current = try SecretInput.read("Current passcode", fromStdin: stdin)
            _ = try client.call(.removePasscode(current: current))
            print("passcode removed; enrolled identities removed")
        }
    }
}

struct Enroll: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Enrol a finger or face (needs the device passcode).")
    @OptionGroup var client: ClientOptions
    @Argument(help: "A name for the identity, e.g. right-index-finger.") var name: String
    @Flag(help: "Read the passcode from standard input.") var stdin = false
    func run() throws {
        let passcode = try SecretInput.read("Device passcode", fromStdin: stdin)
        // A real reader reports each stage: a progress bar, redrawn in place on a terminal.
        let terminal = isatty(STDOUT_FILENO) == 1
        _ = try client.call(.enroll(passcode: passcode, name: name), onEvent: { reply in
            guard case .enrollProgress(let p) = reply else { return }
            let width = 20
            let filled = p.stages > 0 ? min(width, width * p.stage / p.stages) : 0
            let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
            let line = "\(bar) stage \(min(p.stage + 1, p.stages)) of \(p.stages): \(p.message)"
            if terminal { Swift.print("\r\u{1B}[K" + Printable.field(line), terminator: "") } else { print(line) }
            fflush(nil)
        })
        if terminal { print("") }
        print("enrolled \(name)")
    }
}

struct Unenroll: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Remove an enrolled identity (needs the device passcode).")
    @OptionGroup var client: ClientOptions
    @Argument(help: "The identity's name.") var name: String
    @Flag(help: "Read the passcode from standard input.") var stdin = false
    func run() throws {
        let passcode = try SecretInput.read("Device passcode", fromStdin: stdin)
        _ = try client.call(.unenroll(passcode: passcode, name: name))
        print("removed \(name)")
    }
}
