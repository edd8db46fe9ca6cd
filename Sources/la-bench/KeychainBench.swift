import EnclaveClient
import EnclaveProtocol
import Foundation
import LocalAuthentication
import LocalAuthenticationTesting
import Security

/// `la-bench keychain N`: store N generic passwords, 300 random lookups by attribute (with the
/// secret), 300 deletes by attribute — through SecItem calls, the real socket and daemon. Then, on
/// 16 connections at once, lookups and stores. Prints one JSON line, the same shape as
/// bench/keychain/gnome_keyring.py, with the limits measured in the same run: the raw Unix-socket
/// round trip and one durable write (the single writer's commit rate), and what a look-up and a
/// store cost each process's CPU. `LA_BENCH_KEYCHAIN_PER_CLIENT` (default 300) sets the requests
/// per client of the 16-client runs: longer runs, to profile the daemon under (the stores then
/// stop the run at the keychain's 10,000-item quota above ~540 per client).
enum KeychainBench {
    static let concurrentClients = 16

    static func run(items n: Int) async throws {
        let enclave = try TestEnclave(.with { $0.passcode = nil })
        defer { enclave.stop() }
        func timed(_ body: () -> OSStatus) -> Double {
            let t = DispatchTime.now().uptimeNanoseconds
            let status = body()
            precondition(status == errSecSuccess, "status \(status)")
            return Double(DispatchTime.now().uptimeNanoseconds - t) / 1e9
        }
        var store: [Double] = []
        var lookups: [Double] = []
        var deletes: [Double] = []
        var victims = Set<Int>()
        enclave.run {
            for i in 0..<n {
                store.append(
                    timed {
                        SecItemAdd(
                            [
                                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                                kSecAttrAccount as String: "user\(i)", kSecAttrLabel as String: "item \(i)",
                                kSecValueData as String: Data("secret-\(i)".utf8),
                            ] as CFDictionary,
                            nil
                        )
                    }
                )
            }
            var rng = SeededGenerator(seed: 7)
            for _ in 0..<300 {
                let j = Int.random(in: 0..<n, using: &rng)
                lookups.append(
                    timed {
                        var item: CFTypeRef?
                        let status = SecItemCopyMatching(
                            [
                                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                                kSecAttrAccount as String: "user\(j)", kSecReturnData as String: true,
                            ] as CFDictionary,
                            &item
                        )
                        precondition(item as? Data == Data("secret-\(j)".utf8))
                        return status
                    }
                )
            }
            while victims.count < min(300, n) { victims.insert(Int.random(in: 0..<n, using: &rng)) }
            for j in victims {
                deletes.append(
                    timed {
                        SecItemDelete(
                            [
                                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                                kSecAttrAccount as String: "user\(j)",
                            ] as CFDictionary
                        )
                    }
                )
            }
        }
        // 16 clients at once, each on its own connection: lookups of the items above, then stores of new ones.
        let connections = try (0..<concurrentClients).map { _ in try EnclaveConnection(socketPath: enclave.socketPath) }
        defer { for connection in connections { connection.close() } }
        let perClient =
            Int(ProcessInfo.processInfo.environment["LA_BENCH_KEYCHAIN_PER_CLIENT"] ?? "").flatMap { $0 > 0 ? $0 : nil }
            ?? 300
        let left = (0..<n).filter { !victims.contains($0) }
        guard !left.isEmpty else {
            throw EnclaveClientError.protocolError("no items left to look up: use more than 300")
        }
        let processes = [enclave.processID, getpid()]
        // What one look-up costs each process's CPU (every thread), over the 16-client run.
        let (lookupRate, lookupCPU) = try await CPUTime.perOperation(
            concurrentClients * perClient,
            processes: processes
        ) {
            try await Bench.throughput(connections, perClient) { c, i in
                let j = left[(i * 7919) % left.count]
                let reply = try await c.request(
                    .keychainCopy(
                        KeychainRequest(
                            attributes: [
                                "class": .string("genp"), "svce": .string("bench"),
                                "acct": .string("user\(j)"),
                            ],
                            context: "bench",
                            returnData: true
                        )
                    )
                )
                guard case .keychain(let k) = reply, k.status == .success,
                    k.items.first?.data == Data("secret-\(j)".utf8)
                else {
                    throw EnclaveClientError.protocolError("lookup: \(reply)")
                }
            }
        }
        // The same look-ups as an app makes them: SecItemCopyMatching, synchronous, from 16 threads
        // of one process (one connection, as the library keeps one per daemon).
        // (The test daemon is named per call: a thread does not inherit the task-local that names it.)
        let (secItemRate, secItemCPU) = try CPUTime.perOperationBlocking(
            concurrentClients * perClient,
            processes: processes
        ) {
            try Bench.blockingThroughput(threads: concurrentClients, perClient) { t, i in
                let j = left[(t * perClient + i) * 7919 % left.count]
                var item: CFTypeRef?
                let status = enclave.run {
                    SecItemCopyMatching(
                        [
                            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                            kSecAttrAccount as String: "user\(j)", kSecReturnData as String: true,
                        ] as CFDictionary,
                        &item
                    )
                }
                guard status == errSecSuccess, item as? Data == Data("secret-\(j)".utf8) else {
                    throw EnclaveClientError.protocolError("SecItemCopyMatching: \(status)")
                }
            }
        }
        let (storeRate, storeCPU) = try await CPUTime.perOperation(concurrentClients * perClient, processes: processes)
        {
            try await Bench.throughput(connections, perClient) { c, i in
                let id = UUID().uuidString
                let reply = try await c.request(
                    .keychainAdd(
                        KeychainRequest(
                            attributes: [
                                "class": .string("genp"), "svce": .string("bench-concurrent"),
                                "acct": .string(id), "v_Data": .data(Data(id.utf8)),
                            ],
                            context: "bench"
                        )
                    )
                )
                guard case .keychain(let k) = reply, k.status == .success else {
                    throw EnclaveClientError.protocolError("store: \(reply)")
                }
            }
        }
        let raw = try RawSocketEcho.measure(iterations: 2000).sorted()
        let durable = RawSocketEcho.durableWrites(iterations: 500, directory: enclave.stateDirectory)
        let rawP50 = raw[raw.count / 2]
        let commitRate = Double(durable.count) / durable.reduce(0, +)
        let lookupP50 = lookups.sorted()[lookups.count / 2]

        /// Microseconds of CPU per operation, daemon and client (null where a clock could not be read).
        func cpu(_ perOperation: [Double?]) -> String {
            let us = perOperation.map { $0.map { String(format: "%.1f", $0 * 1e6) } ?? "null" }
            return "{\"daemon\": \(us[0]), \"client\": \(us[1])}"
        }
        func stats(_ xs: [Double]) -> String {
            let s = xs.sorted()
            let p50 = s[s.count / 2] * 1e3
            let p99 = s[min(s.count - 1, Int(Double(s.count) * 0.99))] * 1e3
            return String(
                format: "{\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"ops_per_s\": %.1f}",
                p50,
                p99,
                Double(s.count) / s.reduce(0, +)
            )
        }
        print(
            "{\"peer\": \"laenclaved\", \"items\": \(n), \"store\": \(stats(store)), \"lookup\": \(stats(lookups)), \"delete\": \(stats(deletes)), "
                + String(
                    format:
                        "\"raw_round_trip_us\": %.1f, \"lookup_p50_over_raw\": %.1f, \"durable_commits_per_s\": %.0f, ",
                    rawP50 * 1e6,
                    lookupP50 / rawP50,
                    commitRate
                )
                + String(
                    format: "\"lookup_16_clients_per_s\": %.0f, \"lookup_16_threads_secitem_per_s\": %.0f, ",
                    lookupRate,
                    secItemRate
                )
                + String(
                    format: "\"store_16_clients_per_s\": %.0f, \"store_16_over_commit_rate\": %.2f, ",
                    storeRate,
                    storeRate / commitRate
                )
                + "\"cpu_us_per_lookup\": \(cpu(lookupCPU)), \"cpu_us_per_secitem_lookup\": \(cpu(secItemCPU)), \"cpu_us_per_store\": \(cpu(storeCPU))}"
        )
    }
}

/// Deterministic choices, so runs are repeatable.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension TestEnclave.Configuration {
    static func with(_ change: (inout TestEnclave.Configuration) -> Void) -> TestEnclave.Configuration {
        var c = TestEnclave.Configuration()
        change(&c)
        return c
    }
}
