import EnclaveClient
import EnclaveProtocol
import Foundation
import LocalAuthentication
import LocalAuthenticationTesting

/// Measures the daemon through the public API against an isolated daemon process:
///  1. protocol round trip (a request that touches no storage) — the floor;
///  2. evaluatePolicy with a queued immediate match, sequential — the full prompt path, including
///     the durable write of the ledger and the audit entry;
///  3. throughput of canEvaluatePolicy and of prompt-free evaluations (reuse window) with many
///     concurrent client connections.
/// Usage: la-bench [iterations] [max-clients]; la-bench daemon SOCKET [iterations] (a running daemon);
/// la-bench wire N (what the wire's coding costs a message: `WireCodingBench`); la-bench reuse N, la-bench match N, la-bench protected N, la-bench handoff N, la-bench can N CLIENTS, la-bench lookup N CLIENTS (one kind of request in a loop, to profile under);
/// la-bench pty-scan N (what administration on a terminal adds: `PtyScanBench`); la-bench tpm N TCTI
/// (what the TPM root costs at start: `TPMBench`); la-bench tpm-attest N TCTI (the TPM's certify
/// statement about a key, beside tpm2_certify: `TPMAttestationBench`); la-bench tpm-keys N TCTI (a
/// key's signature in the TPM beside tpm2_sign: `TPMKeyBench`)
@main
struct Bench {
    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.down)))]
    }

    static func micros(_ s: Double) -> String { String(format: "%.0f µs", s * 1e6) }

    static func time(_ body: () throws -> Void) rethrows -> Double {
        let t = DispatchTime.now().uptimeNanoseconds
        try body()
        return Double(DispatchTime.now().uptimeNanoseconds - t) / 1e9
    }

    static func main() async throws {
        let args = CommandLine.arguments
        if args.count > 2 && args[1] == "echo-server" { RawSocketEcho.serve(path: args[2]) }
        if args.count > 1 && args[1] == "nio-echo-server" {
            guard args.count > 3, let shape = NIOSocketEcho.Shape(rawValue: args[3]) else {
                FileHandle.standardError.write(
                    Data("usage: la-bench nio-echo-server PATH shell|async-channel|handler\n".utf8)
                )
                exit(2)
            }
            try await NIOSocketEcho.serve(path: args[2], shape: shape)
        }
        if args.count > 1 && args[1] == "wire" {
            return WireCodingBench.run(iterations: max(1, args.count > 2 ? Int(args[2]) ?? 20_000 : 20_000))
        }
        if args.count > 1 && args[1] == "passcode" {
            return try await PasscodeBench.run(checks: args.count > 2 ? Int(args[2]) ?? 10 : 10)
        }
        if args.count > 1 && args[1] == "load" {
            return try await LoadBench.run(
                clients: args.count > 2 ? Int(args[2]) ?? 64 : 64,
                seconds: args.count > 3 ? Double(args[3]) ?? 60 : 60
            )
        }
        if args.count > 2 && args[1] == "daemon" {
            return try SystemDaemonBench.run(
                socket: args[2],
                iterations: max(1, args.count > 3 ? Int(args[3]) ?? 2000 : 2000)
            )
        }
        if args.count > 1 && args[1] == "keychain" {
            return try await KeychainBench.run(items: args.count > 2 ? Int(args[2]) ?? 1000 : 1000)
        }
        if args.count > 1 && args[1] == "secitem-threads" {
            return try SecItemThreadsBench.run(pairsPerThread: max(1, args.count > 2 ? Int(args[2]) ?? 200 : 200))
        }
        if args.count > 1 && args[1] == "handoff" {
            return try HandoffBench.run(iterations: max(1, args.count > 2 ? Int(args[2]) ?? 1000 : 1000))
        }
        if args.count > 1 && args[1] == "pty-scan" {
            return try PtyScanBench.run(iterations: max(1, args.count > 2 ? Int(args[2]) ?? 200 : 200))
        }
        if args.count > 3 && args[1] == "tpm-attest" {
            return try TPMAttestationBench.run(iterations: max(1, Int(args[2]) ?? 50), tcti: args[3])
        }
        if args.count > 3 && args[1] == "tpm-keys" {
            return try TPMKeyBench.run(iterations: max(1, Int(args[2]) ?? 50), tcti: args[3])
        }
        if args.count > 3 && args[1] == "tpm" {
            return try TPMBench.run(iterations: max(1, Int(args[2]) ?? 50), tcti: args[3])
        }
        if args.count > 1 && args[1] == "reuse" {
            return try await reuseOnly(iterations: args.count > 2 ? Int(args[2]) ?? 100_000 : 100_000)
        }
        if args.count > 1 && args[1] == "match" {
            return try await matchesOnly(iterations: args.count > 2 ? Int(args[2]) ?? 20_000 : 20_000)
        }
        if args.count > 1 && args[1] == "protected" {
            return try await protectedReadsOnly(iterations: args.count > 2 ? Int(args[2]) ?? 2000 : 2000)
        }
        if args.count > 1 && args[1] == "lookup" {
            return try lookUpsOnly(
                iterations: args.count > 2 ? Int(args[2]) ?? 20_000 : 20_000,
                clients: args.count > 3 ? Int(args[3]) ?? 16 : 16
            )
        }
        if args.count > 1 && args[1] == "can" {
            return try canEvaluateOnly(
                iterations: args.count > 2 ? Int(args[2]) ?? 100_000 : 100_000,
                clients: args.count > 3 ? Int(args[3]) ?? 16 : 16
            )
        }
        let iterations = args.count > 1 ? Int(args[1]) ?? 1000 : 1000
        let maxClients = args.count > 2 ? Int(args[2]) ?? 16 : 16
        let enclave = try TestEnclave()
        let control = try enclave.connection()
        print(
            "la-bench: \(iterations) iterations, up to \(maxClients) concurrent clients, daemon pid \(enclave.processID)"
        )
        print("")
        print("| measurement | p50 | p99 | mean | ops/s | p50 ÷ raw round trip |")
        print("|---|---|---|---|---|---|")

        var raw = 0.0
        func row(_ name: String, _ samples: [Double]) {
            let s = samples.sorted()
            let mean = s.reduce(0, +) / Double(s.count)
            let p50 = percentile(s, 0.5)
            print(
                "| \(name) | \(micros(p50)) | \(micros(percentile(s, 0.99))) | \(micros(mean)) | \(String(format: "%.0f", 1 / mean)) | \(String(format: "%.2f", p50 / raw)) |"
            )
        }

        // 0. The physical limit: a raw Unix-socket request/response between two processes.
        let echo = try RawSocketEcho.measure(iterations: iterations)
        raw = percentile(echo.sorted(), 0.5)
        row("raw Unix-socket round trip (echo pair, the limit)", echo)
        row(
            "one durable write (4 KiB + fdatasync, the other limit)",
            RawSocketEcho.durableWrites(iterations: min(iterations, 500), directory: enclave.stateDirectory)
        )
        // What SwiftNIO costs before the daemon does any work: its own floor, and the daemon's socket shell.
        row(
            "echo through a SwiftNIO channel handler (the library's floor)",
            try RawSocketEcho.measure(iterations: iterations, server: ["nio-echo-server", "handler"])
        )
        row(
            "echo through the daemon's socket shell (ChannelInbox, event-loop task, FrameDecoder)",
            try RawSocketEcho.measure(iterations: iterations, server: ["nio-echo-server", "shell"])
        )
        row(
            "echo through the shell before (NIOAsyncChannel, event-loop task, FrameDecoder)",
            try RawSocketEcho.measure(iterations: iterations, server: ["nio-echo-server", "async-channel"])
        )

        // 1. Floor: one request/response over the socket, no storage.
        var floor: [Double] = []
        for _ in 0..<iterations { floor.append(try time { _ = try control.request(.clearSimulated) }) }
        row("protocol round trip (no storage)", floor)

        // 2. Full prompt path with an immediate match.
        var full: [Double] = []
        try await enclave.run {
            for _ in 0..<iterations {
                try enclave.queue(.match)
                let context = LAContext()
                let t = DispatchTime.now().uptimeNanoseconds
                _ = try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "bench")
                full.append(Double(DispatchTime.now().uptimeNanoseconds - t) / 1e9)
            }
        }
        row("evaluatePolicy, queued match (prompt + durable record)", full)

        // The matches above opened the reuse window: evaluations inside it change no counter.
        var reuse: [Double] = []
        for i in 0..<iterations {
            let context = "sequential-reuse-\(i)"
            let start = DispatchTime.now().uptimeNanoseconds
            let reply = try await control.request(
                .evaluate(
                    .init(context: context, policy: 1, options: EvaluationOptions(reason: "bench", reuseDuration: 300))
                )
            )
            reuse.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            guard case .evaluated(let r) = reply, r.success else {
                throw EnclaveClientError.protocolError("reuse evaluation failed: \(reply)")
            }
            _ = try await control.request(.invalidate(.init(context: context)))
        }
        row("evaluatePolicy in the reuse window (no counter change)", reuse)

        // A new connection: accept, the client's identity pinned and checked, hello, close.
        var connect: [Double] = []
        for _ in 0..<min(iterations, 1000) {
            connect.append(try time { try EnclaveConnection(socketPath: enclave.socketPath).close() })
        }
        row("connection set-up (connect, identity, hello)", connect)

        var canEval: [Double] = []
        enclave.run {
            let context = LAContext()
            for _ in 0..<iterations {
                canEval.append(
                    time {
                        var e: NSError?
                        _ = context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &e)
                    }
                )
            }
        }
        row("canEvaluatePolicy", canEval)

        // 3. Throughput with concurrent clients, each on its own connection.
        print("")
        print(
            "| concurrent clients | canEvaluatePolicy ops/s | canEvaluatePolicy, blocking, a thread per client ops/s | evaluatePolicy in reuse window ops/s |"
        )
        print("|---|---|---|---|")
        var clients = 1
        var cpuLine = ""
        while clients <= maxClients {
            let perClient = max(iterations / clients, 50)
            let connections = try (0..<clients).map { _ in try EnclaveConnection(socketPath: enclave.socketPath) }
            let canRate = try await throughput(connections, perClient) { c, i in
                _ = try await c.request(.canEvaluate(.init(context: "bench-\(i % 8)", policy: 1)))
            }
            // The synchronous form LAContext.canEvaluatePolicy uses: each client's thread reads its own reply.
            let blockingRate = try blockingThroughput(connections, perClient) { c, i in
                _ = try c.request(.canEvaluate(.init(context: "bench-\(i % 8)", policy: 1)))
            }
            let reuseRate = try await throughput(connections, perClient) { c, i in
                // A fresh context each time (so the reuse window, not the context's own authorization,
                // answers), released afterwards as LAContext's deinit does.
                let options = EvaluationOptions(reason: "bench", reuseDuration: 300)
                let context = "reuse-\(i)-\(UUID().uuidString.prefix(8))"
                let reply = try await c.request(.evaluate(.init(context: context, policy: 1, options: options)))
                c.send(.invalidate(.init(context: context))) { _ in }
                guard case .evaluated(let r) = reply, r.success else {
                    throw EnclaveClientError.protocolError("reuse evaluation failed: \(reply)")
                }
            }
            print(
                "| \(clients) | \(String(format: "%.0f", canRate)) | \(String(format: "%.0f", blockingRate)) | \(String(format: "%.0f", reuseRate)) |"
            )
            if clients * 4 > maxClients {
                // What one request costs the cores at the largest load: the ceiling of any rate.
                // The reuse run's last invalidations are answered first, outside the window; the
                // window is at least 20,000 requests.
                for c in connections { _ = try await c.request(.status) }
                cpuLine = try await CPUFigures.lines(
                    daemon: enclave.processID,
                    connections: connections,
                    perClient: max(perClient, 20_000 / clients)
                )
            }
            for connection in connections { connection.close() }
            clients *= 4
        }
        print("")
        print(cpuLine)
        let status = (try? String(contentsOfFile: "/proc/\(enclave.processID)/status", encoding: .utf8)) ?? ""
        let memory = status.split(separator: "\n").filter { $0.hasPrefix("VmHWM") || $0.hasPrefix("VmRSS") }
        print("")
        print(
            "daemon memory after the run: "
                + memory.map { $0.split(whereSeparator: \.isWhitespace).joined(separator: " ") }.joined(separator: ", ")
        )
        enclave.stop()
    }

    /// Operations per second with each connection driven by a thread of its own, blocking (as the
    /// synchronous API is called); the first error stops the count.
    static func blockingThroughput(
        _ connections: [EnclaveConnection],
        _ perClient: Int,
        _ op: @escaping @Sendable (EnclaveConnection, Int) throws -> Void
    ) throws -> Double {
        try blockingThroughput(threads: connections.count, perClient) { t, i in try op(connections[t], i) }
    }

    static func blockingThroughput(
        threads: Int,
        _ perThread: Int,
        _ op: @escaping @Sendable (_ thread: Int, _ i: Int) throws -> Void
    ) throws -> Double {
        let done = DispatchGroup()
        let failure = HandedResult<any Error>()
        let start = DispatchTime.now().uptimeNanoseconds
        for t in 0..<threads {
            done.enter()
            Thread {
                defer { done.leave() }
                do { for i in 0..<perThread { try op(t, i) } } catch { failure.setFirst(error) }
            }.start()
        }
        done.wait()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        if let error = failure.current { throw error }
        return Double(threads * perThread) / seconds
    }

    static func throughput(
        _ connections: [EnclaveConnection],
        _ perClient: Int,
        _ op: @escaping @Sendable (EnclaveConnection, Int) async throws -> Void
    ) async throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try await withThrowingTaskGroup(of: Void.self) { group in
            for c in connections {
                group.addTask { for i in 0..<perClient { try await op(c, i) } }
            }
            try await group.waitForAll()
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return Double(connections.count * perClient) / seconds
    }
}
