import EnclaveClient
import EnclaveProtocol
import Foundation

/// The per-request and per-connection cost of a running daemon given by its socket (a system
/// daemon, as the package starts it), beside the raw round trip of the same run:
///   la-bench daemon SOCKET [iterations]
/// Run it as a user the daemon serves; run it against the daemon with its privileged helper (as
/// the unit starts it) and as root (no helper) to see what the helper costs.
enum SystemDaemonBench {
    static func run(socket: String, iterations: Int) throws {
        let control = try EnclaveConnection(socketPath: socket)
        print(
            "la-bench daemon \(socket): \(iterations) iterations, \(control.hello.mode.rawValue) mode, this client uid \(getuid())"
        )
        print("")
        print("| measurement | p50 | p99 | mean | p50 ÷ raw round trip |")
        print("|---|---|---|---|---|")
        let raw = try RawSocketEcho.measure(iterations: iterations).sorted()
        let rawP50 = Bench.percentile(raw, 0.5)
        func row(_ name: String, _ samples: [Double]) {
            let s = samples.sorted()
            let mean = s.reduce(0, +) / Double(s.count)
            print(
                "| \(name) | \(Bench.micros(Bench.percentile(s, 0.5))) | \(Bench.micros(Bench.percentile(s, 0.99))) | \(Bench.micros(mean)) | \(String(format: "%.2f", Bench.percentile(s, 0.5) / rawP50)) |"
            )
        }
        row("raw Unix-socket round trip (echo pair, the limit)", raw)
        // A request that touches no storage: the peer's executable is checked before it, as before every request.
        var floor: [Double] = []
        for _ in 0..<(iterations + 100) {
            floor.append(try Bench.time { _ = try control.request(.domainState(.init(context: nil))) })
        }
        row("protocol round trip (domainState)", Array(floor.dropFirst(100)))
        var connect: [Double] = []
        for _ in 0..<min(iterations, 1000) {
            connect.append(try Bench.time { try EnclaveConnection(socketPath: socket).close() })
        }
        row("connection set-up (connect, identity, hello)", connect)
    }
}
