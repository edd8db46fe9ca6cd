import Foundation
import GRDB
import LocalAuthentication
import LocalAuthenticationTesting
import Security

/// A daemon on the TPM root beside one on the software root, in the same run (issue 31): the hot
/// paths — canEvaluatePolicy, an evaluation, a keychain store and look-up — touch no TPM, so they
/// cost the same; the TPM's rollback counter moves only on a change that must never roll back (a
/// wrong passcode here). Each row gives the counter's moves per operation, read from the state's
/// generation (in step with the counter).
enum TPMRootBench {
    static func run(iterations: Int, tcti: String) throws {
        print("")
        print(
            "| operation | software root p50 | TPM root p50 | TPM ÷ software | counter moves per operation (TPM root) |"
        )
        print("|---|---|---|---|---|")
        // Each root twice, in turn (the first daemon of a run meets a colder disk): the mean of both.
        var runs: [String: [[(String, Double, Double?)]]] = [:]
        for setting in ["off", tcti, tcti, "off"] {
            runs[setting, default: []].append(try measure(iterations: iterations, tpm: setting))
        }
        let software = mean(runs["off"] ?? [])
        let tpm = mean(runs[tcti] ?? [])
        for (name, soft, _) in software {
            guard let (_, hard, moves) = tpm.first(where: { $0.0 == name }) else { continue }
            print(
                "| \(name) | \(Bench.micros(soft)) | \(Bench.micros(hard)) | \(String(format: "%.2f", hard / soft)) | \(moves.map { String(format: "%.2f", $0) } ?? "n/a") |"
            )
        }
    }

    private static func mean(_ runs: [[(String, Double, Double?)]]) -> [(String, Double, Double?)] {
        guard let first = runs.first else { return [] }
        return first.indices.map { i in
            (first[i].0, runs.map { $0[i].1 }.reduce(0, +) / Double(runs.count), first[i].2)
        }
    }

    /// (operation, p50 seconds, counter moves per operation), sorted by operation.
    private static func measure(iterations: Int, tpm: String) throws -> [(String, Double, Double?)] {
        var configuration = TestEnclave.Configuration()
        configuration.tpm = tpm
        let enclave = try TestEnclave(configuration)
        defer { enclave.stop() }
        var rows: [(String, Double, Double?)] = []
        func block(_ name: String, _ count: Int, _ body: () throws -> Void) throws {
            let before = try generation(enclave)
            var samples: [Double] = []
            for _ in 0..<count { samples.append(try Bench.time(body)) }
            let after = try generation(enclave)
            let moves = before.flatMap { b in after.map { Double($0 - b) / Double(count) } }
            rows.append((name, Bench.percentile(samples.sorted(), 0.5), moves))
        }
        try block("canEvaluatePolicy", iterations) {
            enclave.run {
                var error: NSError?
                _ = LAContext().canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)
            }
        }
        try block("evaluatePolicy, queued match", iterations) {
            try enclave.queue(.match)
            let done = DispatchSemaphore(value: 0)
            enclave.run {
                LAContext().evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "bench") { _, _ in
                    done.signal()
                }
            }
            done.wait()
        }
        var n = 0
        try block("SecItemAdd", iterations) {
            n += 1
            let status = enclave.run {
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                        kSecAttrAccount as String: "a\(n)", kSecValueData as String: Data("secret".utf8),
                    ] as CFDictionary,
                    nil
                )
            }
            precondition(status == errSecSuccess)
        }
        try block("SecItemCopyMatching", iterations) {
            let status = enclave.run {
                var result: CFTypeRef?
                return SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bench",
                        kSecAttrAccount as String: "a1", kSecReturnData as String: true,
                    ] as CFDictionary,
                    &result
                )
            }
            precondition(status == errSecSuccess)
        }
        // Four at a time: the fifth would start the passcode delay.
        var guesses = 0
        for _ in 0..<max(1, iterations / 50) {
            try block("a wrong passcode (then the right one)", 4) {
                guesses += 1
                precondition((try? enclave.setPasscode("5678", current: "9\(guesses)")) == nil)
            }
            try enclave.setPasscode("1234", current: "1234")
        }
        // A start: on the TPM root one unseal and one read of the counter more.
        var starts: [Double] = []
        for _ in 0..<5 {
            enclave.stop()
            starts.append(try Bench.time { try enclave.start() })
        }
        rows.append(("daemon start, until it answers", Bench.percentile(starts.sorted(), 0.5), nil))
        return Dictionary(grouping: rows, by: \.0).map { name, group in
            (name, group.map(\.1).reduce(0, +) / Double(group.count), group.first?.2)
        }.sorted { $0.0 < $1.0 }
    }

    /// The state's generation, nil on the software root (no anchor).
    private static func generation(_ enclave: TestEnclave) throws -> UInt64? {
        let queue = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite")
        defer { try? queue.close() }
        let anchor = try queue.read { db in
            try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'rollbackAnchor'")
        }
        return try anchor.flatMap {
            (try JSONSerialization.jsonObject(with: $0) as? [String: Any])?["generation"] as? UInt64
        }
    }
}
