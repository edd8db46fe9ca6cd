import EnclaveClient
import Foundation
import LocalAuthenticationTesting

#if canImport(Glibc)
import Glibc
#endif

/// What handing a descriptor to the daemon costs (`la-bench handoff N`): a pipe handed as secret
/// input N times through the client library — a ticket asked on the connection, the handoff
/// socket's connect, its `ready`, the message with the descriptor, the answer — beside a raw
/// Unix-socket round trip of the same run (the limit: the exchange is three of them and a connect).
enum HandoffBench {
    static func run(iterations: Int) throws {
        let enclave = try TestEnclave()
        defer { enclave.stop() }
        let connection = try enclave.connection()
        var samples: [Double] = []
        samples.reserveCapacity(iterations)
        for _ in 0..<iterations {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw POSIXError(.EMFILE) }
            defer {
                close(ends[0])
                close(ends[1])
            }
            samples.append(try Bench.time { try connection.handOverSecretInput(ends[0]) })
        }
        samples.sort()
        let raw = try RawSocketEcho.measure(iterations: max(1000, iterations)).sorted()
        print(
            "handoff of a pipe (ticket, connect, ready, message, answer): p50 \(Bench.micros(Bench.percentile(samples, 0.5))), p99 \(Bench.micros(Bench.percentile(samples, 0.99)))"
        )
        print("raw Unix-socket round trip (the limit): p50 \(Bench.micros(Bench.percentile(raw, 0.5)))")
    }
}
