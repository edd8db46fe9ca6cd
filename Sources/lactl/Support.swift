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
    @Option(
        help:
            "Talk to the daemon at this socket (default: $LAENCLAVED_SOCKET, the system daemon, or the user daemon, started on demand)."
    )
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
    func call(
        _ request: Request,
        onEvent: (@Sendable (Reply) -> Void)? = nil,
        on connect: (() throws -> EnclaveConnection)? = nil
    ) throws -> Reply {
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

    /// Administration: hands the daemon where the person's answers come from — this terminal, where
    /// the daemon itself asks (saying what is being allowed), or with `--stdin` standard input, one
    /// secret per line — then sends `request`. lactl never reads a passcode itself: a file on
    /// standard input is passed through a pipe as it is (`handOverSecretInput`), a pipe handed on.
    func administer(_ request: Request, stdin: Bool, onEvent: (@Sendable (Reply) -> Void)? = nil) throws -> Reply {
        let connection = try connection()
        if stdin {
            do { try connection.handOverSecretInput(STDIN_FILENO) } catch {
                printError("lactl: standard input could not be handed to the daemon: \(error)")
                throw ExitCode(ExitStatus.refused)
            }
        } else if !connection.handOverTerminal(), let why = connection.terminalHandoffRefusal {
            // The daemon asks through the prompt agent of this session all the same, or says why
            // it cannot; this terminal's own reason is said first.
            printError("lactl: this terminal was not handed to the daemon: \(why)")
        }
        return try call(request, onEvent: onEvent, on: { connection })
    }

    private static func blocking(
        _ connection: EnclaveConnection,
        _ request: Request,
        onEvent: (@Sendable (Reply) -> Void)?
    ) throws -> Reply {
        guard let onEvent else { return try connection.request(request) }
        let done = DispatchSemaphore(value: 0)
        let box = HandedResult<Result<Reply, EnclaveClientError>>()
        connection.send(request, onEvent: onEvent) { result in
            box.set(result)
            done.signal()
        }
        done.wait()
        return try box.current!.get()
    }
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

func describeSeconds(_ s: Double) -> String {
    let n = Int(s.rounded(.up))
    return n >= 60 ? "\(n / 60) min \(n % 60) s" : "\(n) s"
}
