import Foundation
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// An X server of its own for a test (Xvfb, no listening on TCP), where the prompt agent's window
/// opens; `xdotool` finds windows and types into them as a person would, ImageMagick's `import`
/// takes screenshots.
public final class VirtualDisplay {
    public static var available: Bool {
        ["/usr/bin/Xvfb", "/usr/bin/xdotool", "/usr/bin/import", "/usr/bin/convert"].allSatisfy {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    /// ":N".
    public let name: String
    private let server: Process

    public init() throws {
        for _ in 0..<20 {
            let number = Int.random(in: 200...899)
            guard !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)"),
                !FileManager.default.fileExists(atPath: "/tmp/.X\(number)-lock")
            else { continue }
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
            p.arguments = [":\(number)", "-screen", "0", "1024x768x24", "-nolisten", "tcp"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            let deadline = Date().addingTimeInterval(10)
            while p.isRunning, Date() < deadline, !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") {
                usleep(20_000)
            }
            if p.isRunning, FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") {
                name = ":\(number)"
                server = p
                return
            }
            if p.isRunning { p.terminate() }
            p.waitUntilExit()
        }
        throw DisplayError(description: "Xvfb did not start")
    }

    deinit {
        server.terminate()
        server.waitUntilExit()
    }

    /// The environment a GTK program needs to open its windows here (and no accessibility bus).
    public var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["DISPLAY"] = name
        env["WAYLAND_DISPLAY"] = nil
        env["GSK_RENDERER"] = "cairo"
        env["GTK_A11Y"] = "none"
        env["NO_AT_BRIDGE"] = "1"
        return env
    }

    @discardableResult
    public func xdotool(_ arguments: [String]) throws -> ProcessOutput {
        try runProcess("/usr/bin/xdotool", arguments, environment: environment, timeout: 20)
    }

    /// The ids of the visible windows whose title contains `title`.
    public func windows(titled title: String) -> [String] {
        guard let out = try? xdotool(["search", "--onlyvisible", "--name", title]), out.status == 0 else { return [] }
        return out.stdout.split(separator: "\n").map(String.init)
    }

    /// Waits for a window titled `title`; nil after `timeout` seconds.
    public func waitForWindow(titled title: String, timeout: Double = 20) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let window = windows(titled: title).first { return window }
            usleep(50_000)
        }
        return nil
    }

    /// Position and size of `window`.
    public func geometry(of window: String) throws -> (x: Int, y: Int, width: Int, height: Int) {
        let out = try xdotool(["getwindowgeometry", "--shell", window]).stdout
        var values: [String: Int] = [:]
        for line in out.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2, let v = Int(parts[1]) { values[String(parts[0])] = v }
        }
        guard let x = values["X"], let y = values["Y"], let w = values["WIDTH"], let h = values["HEIGHT"] else {
            throw DisplayError(description: "no geometry for window \(window): \(out)")
        }
        return (x, y, w, h)
    }

    /// Types `text` into `window` as key presses.
    public func type(_ text: String, into window: String) throws {
        try xdotool(["type", "--window", window, "--delay", "20", text])
    }

    public func press(_ key: String, in window: String) throws {
        try xdotool(["key", "--window", window, key])
    }

    /// The whole screen as a PNG at `path`.
    public func screenshot(to path: String) throws {
        let out = try runProcess(
            "/usr/bin/import",
            ["-display", name, "-window", "root", path],
            environment: environment,
            timeout: 20
        )
        guard out.status == 0 else { throw DisplayError(description: "import failed: \(out.stderr)") }
    }

    /// How many colours the rectangle of a PNG holds (1: nothing drawn there).
    public static func colours(in path: String, x: Int, y: Int, width: Int, height: Int) throws -> Int {
        let out = try runProcess(
            "/usr/bin/convert",
            [path, "-crop", "\(width)x\(height)+\(x)+\(y)", "+repage", "-format", "%k", "info:"],
            timeout: 20
        )
        guard out.status == 0, let n = Int(out.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw DisplayError(description: "convert failed: \(out.stdout) \(out.stderr)")
        }
        return n
    }

    public struct DisplayError: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }
}

/// laenclaved-agent running on a virtual display, against a test daemon.
public final class AgentProcess {
    public let process: Process
    private let outputPath: String

    /// Starts `executable` (default: the built agent) with `--socket` of `enclave`.
    public init(
        on display: VirtualDisplay,
        enclave: TestEnclave,
        executable: String = productPath("laenclaved-agent"),
        prefix: [String] = []
    ) throws {
        outputPath = enclave.directory + "/agent-\(UUID().uuidString.prefix(8)).log"
        FileManager.default.createFile(atPath: outputPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process = Process()
        if prefix.isEmpty {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["--socket", enclave.socketPath]
        } else {
            process.executableURL = URL(fileURLWithPath: prefix[0])
            process.arguments = Array(prefix.dropFirst()) + [executable, "--socket", enclave.socketPath]
        }
        process.environment = display.environment
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    deinit { stop() }

    /// What the agent printed.
    public var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    public func kill() {
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Waits for the agent to end by itself; its status, or nil after `timeout`.
    public func exitStatus(timeout: Double = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        return process.isRunning ? nil : process.terminationStatus
    }
}
