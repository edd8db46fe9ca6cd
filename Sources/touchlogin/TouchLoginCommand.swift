import ArgumentParser
import Foundation
import LocalAuthentication
import TouchLoginAPI
import TouchLoginClient

@main
struct TouchLoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "touchlogin",
        abstract: "Log in to a touchlogin server with your fingerprint (after one password login).",
        subcommands: [
            Login.self, Signup.self, Status.self, Devices.self, Enable.self, Disable.self, Password.self, Logout.self,
        ],
        defaultSubcommand: Login.self
    )
}

struct ClientOptions: ParsableArguments {
    @Option(help: "The server (default: $TOUCHLOGIN_SERVER or http://localhost:8080).") var server: String?
    @Option(help: "Where this client keeps its state (default: $TOUCHLOGIN_STATE_DIR or $XDG_CONFIG_HOME/touchlogin).")
    var stateDir: String?
    @Option(help: "The account's username (default: the one that logged in before; else asked).") var username: String?

    var serverURL: URL {
        get throws {
            let text = server ?? ProcessInfo.processInfo.environment["TOUCHLOGIN_SERVER"] ?? "http://localhost:8080"
            guard let url = URL(string: text), url.scheme == "http" || url.scheme == "https", url.host != nil else {
                throw ValidationError("--server must be an http(s) URL, not \(text)")
            }
            return url
        }
    }

    var stateFile: ClientStateFile {
        let environment = ProcessInfo.processInfo.environment
        if let dir = stateDir ?? environment["TOUCHLOGIN_STATE_DIR"], !dir.isEmpty {
            return ClientStateFile(directory: dir)
        }
        let config =
            environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? "/tmp") + "/.config")
        return ClientStateFile(directory: config + "/touchlogin")
    }

    /// The origin a browser on this server's page would report.
    var origin: String {
        get throws {
            let url = try serverURL
            return "\(url.scheme!)://\(url.host!)" + (url.port.map { ":\($0)" } ?? "")
        }
    }
}

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Log in: fingerprint if enabled, else the password (then offers fingerprint login)."
    )
    @OptionGroup var options: ClientOptions
    @Option(help: "Answer to \"Enable fingerprint login?\": ask, yes or no.") var enable = "ask"
    @Option(help: "This device's name on the server.") var deviceName = ProcessInfo.processInfo.hostName

    func run() async throws {
        guard ["ask", "yes", "no"].contains(enable) else { throw ValidationError("--enable takes ask, yes or no") }
        var session = try ClientSession(options: options, deviceName: deviceName)
        let ok = await session.runLoginFlow(enableAnswer: enable == "ask" ? nil : enable == "yes")
        if !ok { throw ExitCode(1) }
    }
}

struct Signup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create an account on the server (password from the terminal or standard input)."
    )
    @OptionGroup var options: ClientOptions

    func run() async throws {
        var session = try ClientSession(options: options, deviceName: "")
        guard await session.signup() else { throw ExitCode(1) }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "What this client remembers, and whether its session is alive."
    )
    @OptionGroup var options: ClientOptions
    @Flag(help: "Machine-readable output.") var json = false

    func run() async throws {
        let session = try ClientSession(options: options, deviceName: "")
        await session.printStatus(json: json)
    }
}

struct Enable: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Enable fingerprint login on this device (needs a session: log in first)."
    )
    @OptionGroup var options: ClientOptions
    @Option(help: "This device's name on the server.") var deviceName = ProcessInfo.processInfo.hostName

    func run() async throws {
        var session = try ClientSession(options: options, deviceName: deviceName)
        guard await session.enable() else { throw ExitCode(1) }
    }
}

struct Disable: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Turn fingerprint login off: revoke this device on the server and forget its key."
    )
    @OptionGroup var options: ClientOptions

    func run() async throws {
        var session = try ClientSession(options: options, deviceName: "")
        guard await session.disable() else { throw ExitCode(1) }
    }
}

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "The account's devices: list them, or rename or remove one (by its name or the start of its ID; asks the password when the server wants it)."
    )
    @OptionGroup var options: ClientOptions
    @Argument(help: "list (default), rename or remove.") var action = "list"
    @Argument(help: "rename/remove: the device; rename: then its new name.") var arguments: [String] = []

    func run() async throws {
        var session = try ClientSession(options: options, deviceName: "")
        let done: Bool
        switch (action, arguments.count) {
        case ("list", 0): done = await session.listDevices()
        case ("rename", 2): done = await session.renameDevice(arguments[0], to: arguments[1])
        case ("remove", 1): done = await session.removeDevice(arguments[0])
        default: throw ValidationError("usage: touchlogin devices [list | rename DEVICE NEW-NAME | remove DEVICE]")
        }
        guard done else { throw ExitCode(1) }
    }
}

struct Password: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change the account's password (asks the current one, then the new one); every other session ends."
    )
    @OptionGroup var options: ClientOptions

    func run() async throws {
        let session = try ClientSession(options: options, deviceName: "")
        guard await session.changePassword() else { throw ExitCode(1) }
    }
}

struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "End the session on the server (fingerprint login stays enabled)."
    )
    @OptionGroup var options: ClientOptions

    func run() async throws {
        var session = try ClientSession(options: options, deviceName: "")
        guard await session.logout() else { throw ExitCode(1) }
    }
}
