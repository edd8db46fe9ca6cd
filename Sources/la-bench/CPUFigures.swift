import EnclaveClient
import EnclaveProtocol
import Foundation

/// What one `canEvaluatePolicy` costs the cores at the largest load — the ceiling of any rate —
/// in both forms a client calls it, beside the same load on echo servers (the limit).
enum CPUFigures {
    static func lines(daemon: pid_t, connections: [EnclaveConnection], perClient: Int) async throws -> String {
        let clients = connections.count
        let requests = clients * perClient
        let processes = [daemon, getpid()]
        let (_, async) = try await CPUTime.perOperation(requests, processes: processes) {
            _ = try await Bench.throughput(connections, perClient) { c, i in
                _ = try await c.request(.canEvaluate(.init(context: "bench-\(i % 8)", policy: 1)))
            }
        }
        // The form `LAContext.canEvaluatePolicy` uses (Apple's is synchronous): each thread reads its own reply.
        let (_, blocking) = try CPUTime.perOperationBlocking(requests, processes: processes) {
            _ = try Bench.blockingThroughput(connections, perClient) { c, i in
                _ = try c.request(.canEvaluate(.init(context: "bench-\(i % 8)", policy: 1)))
            }
        }
        var lines = [
            line("CPU per canEvaluatePolicy at \(clients) clients (\(requests) requests), async", async),
            line("CPU per canEvaluatePolicy at \(clients) clients (\(requests) requests), blocking", blocking),
        ]
        // The limit beside it: the same load on echo servers, a raw client thread per connection.
        let echoes = [
            ("a SwiftNIO channel handler", "handler"), ("the daemon's socket shell", "shell"),
            ("the shell before (NIOAsyncChannel)", "async-channel"),
        ]
        for (name, shape) in echoes {
            let echo = try RawSocketEcho.cpuPerRoundTrip(
                clients: clients,
                perClient: perClient,
                server: ["nio-echo-server", shape]
            )
            lines.append(
                line(
                    "the limit, \(clients) raw clients on an echo through \(name)",
                    [echo.server, echo.client],
                    server: "server"
                )
            )
        }
        return lines.joined(separator: "\n")
    }

    static func line(_ name: String, _ cost: [Double?], server serverName: String = "daemon") -> String {
        guard cost.count == 2, let server = cost[0], let client = cost[1] else {
            return "\(name): n/a (a process's CPU clock could not be read)"
        }
        let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
        return
            "\(name): \(serverName) \(Bench.micros(server)) + client \(Bench.micros(client)) = \(Bench.micros(server + client)); "
            + "\(Int(cores)) cores carry at most \(String(format: "%.0f", cores / (server + client)))/s"
    }
}
