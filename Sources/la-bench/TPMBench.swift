import EnclaveServer
import Foundation

/// What the TPM root costs (issue 31): it touches the TPM only at start — one unseal — and when a
/// state is made — one seal; nothing on an evaluation or a keychain call. Measured against the
/// TPM `tcti` names (a swtpm simulator here; a real TPM takes tens of milliseconds a command),
/// beside the floor of one TPM command on a fresh connection (TPM2_GetRandom).
/// Then a daemon on each root, side by side (`TPMRootBench`), and a key's signature inside the TPM
/// beside tpm2_sign's (`TPMKeyBench`).
/// Usage: la-bench tpm ITERATIONS TCTI
enum TPMBench {
    static func run(iterations: Int, tcti: String) throws {
        var floor: [Double] = []
        var seals: [Double] = []
        var unseals: [Double] = []
        var increments: [Double] = []
        var reads: [Double] = []
        let auth = [UInt8](repeating: 9, count: 32)
        let counter = try TPMDevice.defineCounter(auth: auth, tcti: tcti)
        defer { try? TPMDevice.undefineCounter(index: counter.index, tcti: tcti) }
        let secret = [UInt8](repeating: 7, count: 32)
        var blob: [UInt8] = []
        for _ in 0..<iterations {
            floor.append(try Bench.time { _ = try TPMDevice.randomBytes(8, tcti: tcti) })
            seals.append(try Bench.time { blob = try TPMDevice.seal(secret, tcti: tcti) })
            unseals.append(
                try Bench.time {
                    let opened = try TPMDevice.unseal(blob, tcti: tcti)
                    precondition(opened == secret)
                }
            )
            increments.append(
                try Bench.time { _ = try TPMDevice.incrementCounter(index: counter.index, auth: auth, tcti: tcti) }
            )
            reads.append(try Bench.time { _ = try TPMDevice.readCounter(index: counter.index, auth: auth, tcti: tcti) })
        }
        for (name, samples) in [
            ("one TPM command on a fresh connection (the floor)", floor),
            ("seal the master secret (a new state)", seals), ("unseal it (each start)", unseals),
            ("move the rollback counter (an NV write: each change that must never roll back)", increments),
            ("read the rollback counter (each passcode check)", reads),
        ] {
            let sorted = samples.sorted()
            let p50 = Bench.percentile(sorted, 0.5)
            print(
                "\(name): p50 \(Bench.micros(p50)), p99 \(Bench.micros(Bench.percentile(sorted, 0.99))), \(String(format: "%.1f", p50 / Bench.percentile(floor.sorted(), 0.5)))× the floor"
            )
        }
        try TPMRootBench.run(iterations: iterations, tcti: tcti)
        try TPMKeyBench.run(iterations: iterations, tcti: tcti)
    }
}
