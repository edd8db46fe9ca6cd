import EnclaveClient
import EnclaveProtocol
import Foundation
import LocalAuthenticationTesting
import Synchronization

/// The load run: `clients` connections for `seconds`, each cycling through canEvaluatePolicy,
/// status, a keychain read, a keychain write (add, then delete, of its own item) and an evaluation
/// in the reuse window. Prints ops/s per kind, errors (any reply that is not the expected answer),
/// and the daemon's memory before and after. Usage: la-bench load [clients] [seconds]
enum LoadBench {
    enum Kind: String, CaseIterable {
        case canEvaluate, status, keychainRead, keychainAdd, keychainDelete, reuseEvaluation
    }

    final class Tally: Sendable {
        private struct Counts {
            var ops: [Kind: Int] = [:]
            var errors: [Kind: Int] = [:]
            var firstError: String?
        }
        private let counts = Mutex(Counts())
        func count(_ kind: Kind, ok: Bool, _ what: @autoclosure () -> String) {
            let first = ok ? nil : what()
            counts.withLock { counts in
                if ok {
                    counts.ops[kind, default: 0] += 1
                } else {
                    counts.errors[kind, default: 0] += 1
                    if counts.firstError == nil { counts.firstError = first }
                }
            }
        }
        var snapshot: (ops: [Kind: Int], errors: [Kind: Int], first: String?) {
            counts.withLock { ($0.ops, $0.errors, $0.firstError) }
        }
    }

    static func memory(_ pid: Int32) -> String {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").filter { $0.hasPrefix("VmHWM") || $0.hasPrefix("VmRSS") }
            .map { $0.split(whereSeparator: \.isWhitespace).joined(separator: " ") }.joined(separator: ", ")
    }

    static func run(clients: Int, seconds: Double) async throws {
        let enclave = try TestEnclave()
        let control = try enclave.connection()
        for i in 0..<100 {
            _ = try await control.request(
                .keychainAdd(
                    KeychainRequest(
                        attributes: [
                            "class": .string("genp"), "svce": .string("load"),
                            "acct": .string("item-\(i)"), "v_Data": .data(Data("secret-\(i)".utf8)),
                        ],
                        context: "setup"
                    )
                )
            )
        }
        // One match opens the reuse window for this app.
        try enclave.queue(.match)
        guard
            case .evaluated(let first) = try await control.request(
                .evaluate(.init(context: "warm", policy: 1, options: EvaluationOptions(reason: "load")))
            ),
            first.success
        else { throw EnclaveClientError.protocolError("the first match failed") }
        let before = memory(enclave.processID)
        print("la-bench load: \(clients) clients × \(Int(seconds)) s, daemon pid \(enclave.processID)")
        // The limits, measured in this run: a raw Unix-socket round trip, one durable commit.
        let raw = Bench.percentile(try RawSocketEcho.measure(iterations: 2000).sorted(), 0.5)
        let durable = Bench.percentile(
            RawSocketEcho.durableWrites(iterations: 300, directory: enclave.stateDirectory).sorted(),
            0.5
        )
        print(
            "limits: raw Unix-socket round trip p50 \(Bench.micros(raw)) (\(String(format: "%.0f", 1 / raw))/s one client); one durable write p50 \(Bench.micros(durable)) (\(String(format: "%.0f", 1 / durable))/s one writer)"
        )
        print("daemon memory before: \(before)")

        let connections = try (0..<clients).map { _ in try EnclaveConnection(socketPath: enclave.socketPath) }
        let tally = Tally()
        let start = DispatchTime.now().uptimeNanoseconds
        let end = start + UInt64(seconds * 1e9)
        await withTaskGroup(of: Void.self) { group in
            for (k, c) in connections.enumerated() {
                group.addTask {
                    var i = 0
                    while DispatchTime.now().uptimeNanoseconds < end {
                        await step(c, client: k, i: i, tally: tally)
                        i += 1
                    }
                }
            }
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        for connection in connections { connection.close() }
        let (ops, errors, firstError) = tally.snapshot
        print("")
        print("| operation | ops | ops/s | errors |")
        print("|---|---|---|---|")
        for kind in Kind.allCases {
            print(
                "| \(kind.rawValue) | \(ops[kind] ?? 0) | \(String(format: "%.0f", Double(ops[kind] ?? 0) / elapsed)) | \(errors[kind] ?? 0) |"
            )
        }
        let total = ops.values.reduce(0, +)
        let failed = errors.values.reduce(0, +)
        print("| all | \(total) | \(String(format: "%.0f", Double(total) / elapsed)) | \(failed) |")
        if let firstError { print("first error: \(firstError)") }
        try await Task.sleep(nanoseconds: 1_000_000_000)
        print("daemon memory after: \(memory(enclave.processID))")
        enclave.stop()
    }

    static func step(_ c: EnclaveConnection, client k: Int, i: Int, tally: Tally) async {
        do {
            switch i % 6 {
            case 0:
                let reply = try await c.request(.canEvaluate(.init(context: "c\(k)", policy: 1)))
                guard case .canEvaluate(let r) = reply else { return tally.count(.canEvaluate, ok: false, "\(reply)") }
                tally.count(.canEvaluate, ok: r.error == nil, "\(r)")
            case 1:
                let reply = try await c.request(.status)
                guard case .status = reply else { return tally.count(.status, ok: false, "\(reply)") }
                tally.count(.status, ok: true, "")
            case 2:
                let j = (k * 7 + i) % 100
                let reply = try await c.request(
                    .keychainCopy(
                        KeychainRequest(
                            attributes: [
                                "class": .string("genp"), "svce": .string("load"),
                                "acct": .string("item-\(j)"),
                            ],
                            context: "r\(k)",
                            returnData: true
                        )
                    )
                )
                guard case .keychain(let r) = reply else { return tally.count(.keychainRead, ok: false, "\(reply)") }
                tally.count(
                    .keychainRead,
                    ok: r.status == .success && r.items.first?.data == Data("secret-\(j)".utf8),
                    "\(r)"
                )
            case 3, 4:
                let account = "client-\(k)-\(i / 6)"
                let attributes: [String: KeychainValue] = [
                    "class": .string("genp"), "svce": .string("load-writes"), "acct": .string(account),
                ]
                if i % 6 == 3 {
                    var add = attributes
                    add["v_Data"] = .data(Data(account.utf8))
                    let reply = try await c.request(.keychainAdd(KeychainRequest(attributes: add, context: "w\(k)")))
                    guard case .keychain(let r) = reply else { return tally.count(.keychainAdd, ok: false, "\(reply)") }
                    tally.count(.keychainAdd, ok: r.status == .success, "\(r)")
                } else {
                    let reply = try await c.request(
                        .keychainDelete(KeychainRequest(attributes: attributes, context: "w\(k)"))
                    )
                    guard case .keychain(let r) = reply else {
                        return tally.count(.keychainDelete, ok: false, "\(reply)")
                    }
                    tally.count(.keychainDelete, ok: r.status == .success, "\(r)")
                }
            default:
                let context = "reuse-\(k)-\(i)"
                let reply = try await c.request(
                    .evaluate(
                        .init(
                            context: context,
                            policy: 1,
                            options: EvaluationOptions(reason: "load", reuseDuration: 300)
                        )
                    )
                )
                c.send(.invalidate(.init(context: context))) { _ in }
                guard case .evaluated(let r) = reply else {
                    return tally.count(.reuseEvaluation, ok: false, "\(reply)")
                }
                tally.count(.reuseEvaluation, ok: r.success, "\(r)")
            }
        } catch {
            tally.count(.canEvaluate, ok: false, "\(error)")
        }
    }
}
