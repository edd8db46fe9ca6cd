import EnclaveClient
import EnclaveProtocol
import Foundation
import LocalAuthenticationTesting

/// One kind of request in a loop against its own daemon, nothing else: a steady load to profile
/// under (`perf record -p DAEMON`).
extension Bench {
    /// `la-bench reuse N`: one match, then N evaluations in its reuse window on one connection,
    /// nothing else — a steady load to profile the daemon under (`perf record -p DAEMON`).
    static func reuseOnly(iterations: Int) async throws {
        let enclave = try TestEnclave()
        defer { enclave.stop() }
        let control = try enclave.connection()
        try enclave.queue(.match)
        let options = EvaluationOptions(reason: "bench", reuseDuration: 300)
        guard
            case .evaluated(let first) = try await control.request(
                .evaluate(.init(context: "first", policy: 1, options: options))
            ), first.success
        else {
            throw EnclaveClientError.protocolError("the first evaluation did not match")
        }
        print("la-bench reuse: daemon pid \(enclave.processID)")
        fflush(nil)
        var samples: [Double] = []
        samples.reserveCapacity(iterations)
        for i in 0..<iterations {
            let context = "reuse-\(i)"
            let start = DispatchTime.now().uptimeNanoseconds
            let reply = try await control.request(.evaluate(.init(context: context, policy: 1, options: options)))
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            guard case .evaluated(let r) = reply, r.success else {
                throw EnclaveClientError.protocolError("reuse evaluation failed: \(reply)")
            }
            _ = try await control.request(.invalidate(.init(context: context)))
        }
        let sorted = samples.sorted()
        print(
            "evaluatePolicy in the reuse window: p50 \(micros(percentile(sorted, 0.5))), p99 \(micros(percentile(sorted, 0.99)))"
        )
    }

    /// `la-bench can N CLIENTS`: N blocking `canEvaluate` requests from each of CLIENTS threads, each
    /// on its own connection, nothing else — the request with the least work, to profile the path
    /// every request shares (`perf record -p DAEMON`, or the bench itself for the client side).
    static func canEvaluateOnly(iterations: Int, clients: Int) throws {
        let enclave = try TestEnclave()
        defer { enclave.stop() }
        let connections = try (0..<clients).map { _ in try EnclaveConnection(socketPath: enclave.socketPath) }
        print("la-bench can: daemon pid \(enclave.processID), client pid \(getpid())")
        fflush(nil)
        let (rate, cost) = try CPUTime.perOperationBlocking(
            clients * iterations,
            processes: [enclave.processID, getpid()]
        ) {
            try blockingThroughput(connections, iterations) { c, i in
                _ = try c.request(.canEvaluate(.init(context: "bench-\(i % 8)", policy: 1)))
            }
        }
        print(
            "canEvaluate, \(clients) threads, blocking: \(String(format: "%.0f", rate))/s; CPU per request: daemon \(cost[0].map(micros) ?? "n/a") + client \(cost[1].map(micros) ?? "n/a")"
        )
    }

    /// `la-bench lookup N CLIENTS`: 1,000 generic passwords stored, then N look-ups by service and
    /// account with the secret from each of CLIENTS threads, each on its own connection, blocking.
    static func lookUpsOnly(iterations: Int, clients: Int) throws {
        let enclave = try TestEnclave(.with { $0.passcode = nil })
        defer { enclave.stop() }
        let connections = try (0..<clients).map { _ in try EnclaveConnection(socketPath: enclave.socketPath) }
        let items = 1000
        for i in 0..<items {
            let attributes: [String: KeychainValue] = [
                "class": .string("genp"), "svce": .string("bench"), "acct": .string("user\(i)"),
                "v_Data": .data(Data("secret-\(i)".utf8)),
            ]
            _ = try connections[0].request(.keychainAdd(KeychainRequest(attributes: attributes, context: "bench")))
        }
        print("la-bench lookup: daemon pid \(enclave.processID), client pid \(getpid())")
        fflush(nil)
        let (rate, cost) = try CPUTime.perOperationBlocking(
            clients * iterations,
            processes: [enclave.processID, getpid()]
        ) {
            try blockingThroughput(connections, iterations) { c, i in
                let query: [String: KeychainValue] = [
                    "class": .string("genp"), "svce": .string("bench"), "acct": .string("user\((i * 7919) % items)"),
                ]
                let reply = try c.request(
                    .keychainCopy(KeychainRequest(attributes: query, context: "bench", returnData: true))
                )
                guard case .keychain(let found) = reply, found.status == .success else {
                    throw EnclaveClientError.protocolError("look-up failed: \(reply)")
                }
            }
        }
        print(
            "look-ups, \(clients) threads, blocking: \(String(format: "%.0f", rate))/s; CPU per look-up: daemon \(cost[0].map(micros) ?? "n/a") + client \(cost[1].map(micros) ?? "n/a")"
        )
    }

    /// `la-bench match N`: N evaluations each answered by a queued match (a prompt, the sensor's
    /// reading, a durable record) on one connection, nothing else — to profile the prompt path under.
    static func matchesOnly(iterations: Int) async throws {
        let enclave = try TestEnclave()
        defer { enclave.stop() }
        let control = try enclave.connection()
        print("la-bench match: daemon pid \(enclave.processID)")
        fflush(nil)
        var samples: [Double] = []
        samples.reserveCapacity(iterations)
        var rssAfterWarmUp = ""
        let processes = [enclave.processID, getpid()]
        let cpuBefore = processes.map(CPUTime.seconds(of:))
        for i in 0..<iterations {
            if i == min(1000, iterations / 2) { rssAfterWarmUp = LoadBench.memory(enclave.processID) }
            // (With no iterations there is no warm-up to read.)
            _ = try await control.request(.simulate(.init(events: [.match])))
            let context = "match-\(i)"
            let start = DispatchTime.now().uptimeNanoseconds
            let reply = try await control.request(
                .evaluate(.init(context: context, policy: 1, options: EvaluationOptions(reason: "bench")))
            )
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            guard case .evaluated(let r) = reply, r.success else {
                throw EnclaveClientError.protocolError("the evaluation did not match: \(reply)")
            }
            _ = try await control.request(.invalidate(.init(context: context)))
        }
        let sorted = samples.sorted()
        print(
            "evaluatePolicy with a queued match: p50 \(micros(percentile(sorted, 0.5))), p99 \(micros(percentile(sorted, 0.99)))"
        )
        print(
            CPUFigures.line(
                "CPU per round (queue a touch, evaluatePolicy, invalidate)",
                CPUTime.cost(iterations, processes: processes, since: cpuBefore)
            )
        )
        print(
            "daemon memory after the warm-up: \(rssAfterWarmUp); after the run: \(LoadBench.memory(enclave.processID))"
        )
    }

    /// `la-bench protected N`: N reads of an item that needs the person (`biometryAny`), each with
    /// a queued match and no `LAContext` (a one-shot context): the second walk of
    /// docs/architecture.md, in a loop to count or profile (`perf record`, uprobes on the
    /// runtime's enqueues; recipe in docs/benchmarks.md).
    static func protectedReadsOnly(iterations: Int) async throws {
        let enclave = try TestEnclave()
        defer { enclave.stop() }
        let control = try enclave.connection()
        let item: [String: KeychainValue] = ["class": .string("genp"), "svce": .string("bench"), "acct": .string("p")]
        var added = item
        added["v_Data"] = .data(Data("secret".utf8))
        let access = AccessControlValue(protection: .whenUnlockedThisDeviceOnly, flags: .biometryAny)
        guard
            case .keychain(let stored) = try await control.request(
                .keychainAdd(KeychainRequest(attributes: added, accessControl: access, context: "add"))
            ), stored.status == .success
        else { throw EnclaveClientError.protocolError("the protected item was not added") }
        print("la-bench protected: daemon pid \(enclave.processID)")
        fflush(nil)
        var samples: [Double] = []
        samples.reserveCapacity(iterations)
        let processes = [enclave.processID, getpid()]
        let cpuBefore = processes.map(CPUTime.seconds(of:))
        for i in 0..<iterations {
            _ = try await control.request(.simulate(.init(events: [.match])))
            let start = DispatchTime.now().uptimeNanoseconds
            let reply = try await control.request(
                .keychainCopy(
                    KeychainRequest(attributes: item, context: "read-\(i)", reason: "bench", returnData: true)
                )
            )
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            guard case .keychain(let found) = reply, found.status == .success else {
                throw EnclaveClientError.protocolError("the protected read failed: \(reply)")
            }
            // Its one-shot context released, as `SecItemCopyMatching` releases it.
            _ = try await control.request(.invalidate(.init(context: "read-\(i)")))
        }
        let sorted = samples.sorted()
        print(
            "protected SecItemCopyMatching with a queued match: p50 \(micros(percentile(sorted, 0.5))), p99 \(micros(percentile(sorted, 0.99)))"
        )
        print(
            CPUFigures.line(
                "CPU per round (queue a touch, the protected read, its context released)",
                CPUTime.cost(iterations, processes: processes, since: cpuBefore)
            )
        )
    }
}
