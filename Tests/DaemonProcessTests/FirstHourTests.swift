import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A Swift developer's first hour, as the README's "Using it from your own package" tells it: every
/// block of that section run as written in a scratch directory — an executable package that
/// depends on this checkout, Apple-platform code built with the implicit import, the failure that
/// says why before the daemon is there, the keychain round trip and the `evaluatePolicy` after,
/// and the package's own XCTest suite on the testing kit. Slow (it builds a package from scratch:
/// several minutes on 2 cores), so it says where it is while it builds.
final class FirstHourTests: XCTestCase {
    private var root: String?

    override func tearDown() {
        if let root {
            // The README starts the daemon by hand, so its command line names no directory of
            // ours: it is found by the runtime directory in its environment.
            for pid in Self.processes(withVariable: "XDG_RUNTIME_DIR=\(root)/runtime") { kill(pid, SIGKILL) }
            try? FileManager.default.removeItem(atPath: root)
        }
        super.tearDown()
    }

    private static func processes(withVariable entry: String) -> [pid_t] {
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.compactMap { pid_t($0) } ?? []
        return pids.filter { pid in
            guard pid != getpid(), let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else {
                return false
            }
            return environ.split(separator: 0).contains { Data($0) == Data(entry.utf8) }
        }
    }

    func testTheReadmesWalkthroughRunsAsWritten() throws {
        let checkout = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let steps = try ReadmeSection.steps(
            readme: checkout + "/README.md",
            heading: "## Using it from your own package"
        )
        XCTAssertGreaterThanOrEqual(steps.count, 10, "the section's blocks: \(steps)")

        var template = Array("/tmp/la-firsthour-XXXXXX".utf8CString)
        let root = String(cString: mkdtemp(&template)!)
        self.root = root
        // The README's layout: the app next to a checkout of this package.
        try FileManager.default.createSymbolicLink(
            atPath: root + "/LocalAuthenticationLinux",
            withDestinationPath: checkout
        )
        for dir in ["/runtime", "/data", "/config"] {
            try FileManager.default.createDirectory(
                atPath: root + dir,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        }
        // A user of their own: the daemon's socket and state in the scratch directory; nothing of
        // the test run's daemon variables.
        var environment = ProcessInfo.processInfo.environment
        for key in ["LAENCLAVED_SOCKET", "LAENCLAVED_PATH", "LA_PROMPT"] { environment[key] = nil }
        environment["XDG_RUNTIME_DIR"] = root + "/runtime"
        environment["XDG_DATA_HOME"] = root + "/data"
        environment["XDG_CONFIG_HOME"] = root + "/config"
        let installed = (DaemonLauncher.installedLocations + [EnclavePaths.systemSocket]).filter {
            FileManager.default.fileExists(atPath: $0)
        }
        try XCTSkipIf(!installed.isEmpty, "\(installed) on this machine: the missing daemon cannot be shown")

        var directory = root
        var lastOutput = ""
        for (number, step) in steps.enumerated() {
            switch step {
            case .file(let name, let text):
                let path = directory + "/" + name
                try FileManager.default.createDirectory(
                    atPath: (path as NSString).deletingLastPathComponent,
                    withIntermediateDirectories: true
                )
                try text.write(toFile: path, atomically: true, encoding: .utf8)
            case .commands(let script):
                let run = try Shell.run(script, in: directory, environment: environment, log: root + "/step-\(number)")
                XCTAssertEqual(run.status, 0, "\(script)\n\(run.output.suffix(4000))")
                guard run.status == 0 else { return }
                directory = run.directory
                lastOutput = run.output
                try check(afterRunning: script, run.output)
            case .output(let expected):
                for line in expected.split(separator: "\n") {
                    // The sample's own paths and what it elides (…) differ from this machine's.
                    let fixed = String(line.prefix { $0 != "/" && $0 != "…" })
                    XCTAssertTrue(
                        lastOutput.contains(fixed),
                        "the README shows \"\(line)\"; the run printed:\n\(lastOutput.suffix(4000))"
                    )
                }
            }
        }
    }

    /// What each run must show beyond the README's sample output.
    private func check(afterRunning script: String, _ output: String) throws {
        if script.contains("swift run hello-keychain || true") {
            // The app made two calls (a delete, then the add) before it gave up: one line said why.
            let said = output.split(separator: "\n").filter { $0.hasPrefix("[LocalAuthentication] ") }
            XCTAssertEqual(said.count, 1, "the missing daemon is said once, not per call:\n\(output.suffix(4000))")
            XCTAssertTrue(said.first?.contains("Fix: ") ?? false, "\(said)")
            XCTAssertTrue(
                output.contains(
                    "SecItemAdd: -25291: No keychain is available. The keychain daemon (laenclaved) could not be reached. no laenclaved for this process: "
                ),
                "SecCopyErrorMessageString carries the reason:\n\(output.suffix(4000))"
            )
        }
        if script.contains("swift test") {
            XCTAssertTrue(output.contains("Executed 1 test, with 0 failures"), output.suffix(4000).description)
        }
    }
}

/// The blocks of one README section, in order: a `sh` block is commands, a `swift` block is the
/// file named (in backquotes) by the paragraph before it, a `text` block is output to expect.
private enum ReadmeSection {
    enum Step {
        case commands(String)
        case file(String, String)
        case output(String)
    }

    static func steps(readme: String, heading: String) throws -> [Step] {
        let text = try String(contentsOfFile: readme, encoding: .utf8)
        guard let start = text.range(of: "\n" + heading + "\n") else { throw XCTSkip("no \(heading) in the README") }
        var body = text[start.upperBound...]
        if let end = body.range(of: "\n## ") { body = body[..<end.lowerBound] }
        var steps: [Step] = []
        var paragraph = ""
        var block: (info: String, lines: [Substring])?
        for line in body.split(separator: "\n", omittingEmptySubsequences: false) {
            if var open = block {
                if line == "```" {
                    let code = open.lines.joined(separator: "\n") + "\n"
                    switch open.info {
                    case "sh": steps.append(.commands(code))
                    case "text": steps.append(.output(code))
                    case "swift":
                        let named = paragraph.split(separator: "`", omittingEmptySubsequences: false).enumerated()
                            .filter { $0.offset % 2 == 1 }.map(\.element)
                        guard let name = named.first(where: { $0.hasSuffix(".swift") }) else {
                            throw NSError(
                                domain: "README",
                                code: 1,
                                userInfo: [NSLocalizedDescriptionKey: "a swift block names no file: \(paragraph)"]
                            )
                        }
                        steps.append(.file(String(name), code))
                    default: break
                    }
                    block = nil
                    paragraph = ""
                } else {
                    open.lines.append(line)
                    block = open
                }
            } else if line.hasPrefix("```") {
                block = (String(line.dropFirst(3)), [])
            } else if !line.trimmingCharacters(in: .whitespaces).isEmpty {
                paragraph = String(line)
            }
        }
        return steps
    }
}

/// Runs a block of the README's commands with bash, as a person pastes it: output to a file (a
/// daemon it starts in the background must not hold a pipe of ours), the directory it ends in
/// kept for the next block. Says where it is every minute while it runs (a package builds for
/// minutes; the suite's watchdog stops a run whose log stands still).
private enum Shell {
    struct Run {
        var status: Int32
        var output: String
        var directory: String
    }

    /// `log`: where the step's output goes (LOG.log) and the directory it ends in (LOG.pwd); one
    /// of each a step, since a daemon a step started keeps writing to the step's output.
    static func run(
        _ script: String,
        in directory: String,
        environment: [String: String],
        log name: String
    ) throws -> Run {
        let log = name + ".log"
        let end = name + ".pwd"
        try? FileManager.default.removeItem(atPath: end)
        // posix_spawn and waitpid, not Foundation's Process: that one counts a child as running
        // while anything it started (the daemon a step leaves running) still holds its descriptors.
        let quoted = "'" + directory.replacingOccurrences(of: "'", with: "'\\''") + "'"
        let pid = try DaemonLauncher.spawn(
            "/bin/bash",
            ["-c", "exec >\(log) 2>&1 </dev/null\nset -euo pipefail\ncd \(quoted)\n" + script + "pwd >\(end)\n"],
            environment: environment,
            inherit: false
        )
        let started = Date()
        var said = started
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            usleep(200_000)
            if Date().timeIntervalSince(said) >= 60 {
                said = Date()
                print(
                    "FirstHourTests: \(Int(said.timeIntervalSince(started))) s into: \(script.split(separator: "\n").joined(separator: "; "))"
                )
                fflush(nil)
            }
            if Date().timeIntervalSince(started) > 1800 {
                kill(pid, SIGKILL)
                XCTFail("a README step ran for 30 minutes: \(script)")
            }
        }
        let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        let ended = (try? String(contentsOfFile: end, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        return Run(status: exitStatus, output: output, directory: ended ?? directory)
    }
}
