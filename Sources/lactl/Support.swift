import ArgumentParser
import EnclaveClient
import EnclaveProtocol
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Exit statuses of lactl (documented in the README).
enum ExitStatus {
    static let daemonUnavailable: Int32 = 69
    static let refused: Int32 = 1

    /// `authenticate`: 0 on success; otherwise 10 + |LAError code| (userCancel -2 → 12), and 30
    /// for notInteractive (-1004).
    static func forLAError(_ code: Int) -> Int32 {
        code == -1004 ? 30 : Int32(10 + abs(code))
    }
}

struct ClientOptions: ParsableArguments {
    @Option(help: "Talk to the daemon at this socket (default: $LAENCLAVED_SOCKET, the system daemon, or the user daemon, started on demand).")
    var socket: String?

    func endpoint() -> EnclaveEndpoint {
        if let socket { return EnclaveEndpoint(socketPath: socket, autostart: false) }
        return EnclaveEndpoint.resolve()
    }

    func connection() throws -> EnclaveConnection {
        do { return try EnclaveConnections.shared(for: endpoint()) } catch {
            printError("lactl: \(error)")
            throw ExitCode(ExitStatus.daemonUnavailable)
        }
    }

    /// Sends a request and returns its reply; a failure reply is printed and exits 1.
    /// One request; `onEvent` sees the events before the final reply (an enrolment's progress).
    func call(_ request: Request, onEvent: (@Sendable (Reply) -> Void)? = nil, on connect: (() throws -> EnclaveConnection)? = nil) throws -> Reply {
        let reply: Reply
        do { reply = try Self.blocking(connect?() ?? connection(), request, onEvent: onEvent) } catch {
            printError("lactl: \(error)")
            throw ExitCode(ExitStatus.daemonUnavailable)
        }
        if case .failure(let f) = reply {
            var text = "lactl: \(f.message)"
            if let after = f.retryAfter { text += " (next attempt in \(Int(after.rounded(.up))) s)" }
            printError(text)
            throw ExitCode(ExitStatus.refused)
        }
        return reply
    }

    private static func blocking(_ connection: EnclaveConnection, _ request: Request, onEvent: (@Sendable (Reply) -> Void)?) throws -> Reply {
        guard let onEvent else { return try connection.request(request) }
        let done = DispatchSemaphore(value: 0)
        let box = ReplyResult()
        connection.send(request, onEvent: onEvent) { result in
            box.result = result
            done.signal()
        }
        done.wait()
        return try box.result!.get()
    }
}

private final class ReplyResult: @unchecked Sendable {
    var result: Result<Reply, EnclaveClientError>?
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((Printable.escaped(text) + "\n").utf8))
}

func printJSON<T: Encodable>(_ value: T) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    encoder.dateEncodingStrategy = .iso8601
    Swift.print(Printable.json(String(decoding: try! encoder.encode(value), as: UTF8.self)))
}

/// Reads a secret: one line from standard input with `--stdin` (scripts), else from the terminal
/// with echo off. Never echoed, never logged.
enum SecretInput {
    nonisolated(unsafe) static var stdinLines: [String]?

    static func read(_ prompt: String, fromStdin: Bool) throws -> String {
        if fromStdin {
            if stdinLines == nil {
                let all = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
                stdinLines = all.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            }
            guard let line = stdinLines?.first, !(stdinLines?.isEmpty ?? true) else {
                throw ValidationError("standard input has no line for: \(prompt)")
            }
            stdinLines?.removeFirst()
            return line
        }
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY)
        guard fd >= 0 else { throw ValidationError("no terminal to ask for the \(prompt.lowercased()); pass it on standard input with --stdin") }
        defer { close(fd) }
        var saved = termios()
        tcgetattr(fd, &saved)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(fd, TCSANOW, &quiet)
        defer { tcsetattr(fd, TCSANOW, &saved) }
        let text = prompt + ": "
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
        var bytes: [UInt8] = []
        var c: UInt8 = 0
        while Glibc.read(fd, &c, 1) == 1, c != 10, c != 13 { if bytes.count < 1024 { bytes.append(c) } }
        _ = Glibc.write(fd, "\n", 1)
        return String(decoding: bytes, as: UTF8.self)
    }
}

func describeSeconds(_ s: Double) -> String {
    let n = Int(s.rounded(.up))
    return n >= 60 ? "\(n / 60) min \(n % 60) s" : "\(n) s"
}
