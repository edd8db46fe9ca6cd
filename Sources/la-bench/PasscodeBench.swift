import EnclaveCore
import Foundation
import LocalAuthentication
import LocalAuthenticationTesting

/// `la-bench passcode [CHECKS]`: one passcode evaluation through the daemon at scrypt cost 15 and
/// 17, beside the limit — one scrypt derivation at that cost in this process — and the daemon's
/// peak memory (VmHWM) after the run.
enum PasscodeBench {
    static func run(checks: Int) async throws {
        print("la-bench passcode: \(checks) evaluations answered with the passcode, per cost")
        print("")
        print(
            "| scrypt cost (r = 8) | memory a check | one derivation in-process (the limit) | evaluation p50 | p50 ÷ limit | daemon VmHWM |"
        )
        print("|---|---|---|---|---|---|")
        for cost in [15, 17] {
            let verifier = try PasscodeVerifier.remade(passcode: "1234", cost: cost)
            var derive: [Double] = []
            for _ in 0..<max(3, checks / 2) { derive.append(try Bench.time { _ = try verifier.derive("1234") }) }
            var configuration = TestEnclave.Configuration()
            configuration.passcodeCost = cost
            configuration.enrolled = []
            let enclave = try TestEnclave(configuration)
            var samples: [Double] = []
            try await enclave.run {
                for _ in 0..<checks {
                    try enclave.queue(.passcode("1234"))
                    let start = Date()
                    try await LAContext().evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Bench")
                    samples.append(Date().timeIntervalSince(start))
                }
            }
            let status = (try? String(contentsOfFile: "/proc/\(enclave.processID)/status", encoding: .utf8)) ?? ""
            let hwm =
                status.split(separator: "\n").first { $0.hasPrefix("VmHWM") }.map {
                    $0.dropFirst(6).trimmingCharacters(in: .whitespaces)
                } ?? "?"
            let limit = Bench.percentile(derive.sorted(), 0.5)
            let p50 = Bench.percentile(samples.sorted(), 0.5)
            print(
                "| \(cost) | \(PasscodeVerifier.memory(cost: cost) >> 20) MiB | \(String(format: "%.0f ms", limit * 1000)) | \(String(format: "%.0f ms", p50 * 1000)) | \(String(format: "%.2f", p50 / limit)) | \(hwm) |"
            )
            enclave.kill()
        }
    }
}
