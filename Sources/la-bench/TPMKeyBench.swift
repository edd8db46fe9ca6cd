import EnclaveServer
import Foundation
import LocalAuthenticationTesting
import Security

/// A Secure Enclave key's signature on the TPM root (issue 31, item 5) beside `tpm2_sign` on the
/// same TPM in the same run (tpm2-tools, a key it made and loaded under the same storage primary;
/// its `-c` context loads it back each time): the daemon's whole path (client, socket, daemon,
/// the TPM's load, sign and flush) against one process of tpm2-tools. Beside them the TPM's share
/// alone (`TPMDevice.sign` in this process) and the software root's signature. The rounds take
/// turns, so a slower moment of the machine falls on every row alike.
enum TPMKeyBench {
    static func run(iterations: Int, tcti: String) throws {
        let directory = NSTemporaryDirectory() + "la-bench-tpm-keys-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tools = FileManager.default.isExecutableFile(atPath: "/usr/bin/tpm2_sign")
        if tools { try prepareTools(directory, tcti: tcti) }

        let digest = [UInt8](repeating: 0x5C, count: 32)
        try Data(digest).write(to: URL(fileURLWithPath: directory + "/digest"))
        let auth = [UInt8](repeating: 3, count: 32)
        let primary = TPMPrimaryContext()
        let inProcess = try TPMDevice.createKey(
            signing: true,
            agreement: false,
            auth: auth,
            tcti: tcti,
            primary: primary
        )

        var tpmRoot = TestEnclave.Configuration()
        tpmRoot.tpm = tcti
        let onTPM = try TestEnclave(tpmRoot)
        defer { onTPM.stop() }
        let onSoftware = try TestEnclave()
        defer { onSoftware.stop() }
        let tpmKey = try key(on: onTPM)
        let softwareKey = try key(on: onSoftware)

        var samples: [String: [Double]] = [:]
        let message = Data("bench".utf8) as CFData
        for _ in 0..<iterations {
            if tools {
                samples["tpm2_sign (one process: load the key's context, sign)", default: []].append(
                    try Bench.time {
                        try tool(
                            "tpm2_sign",
                            ["-c", "key.ctx", "-g", "sha256", "-d", "digest", "-o", "sig"],
                            directory,
                            tcti
                        )
                    }
                )
                // Without a resource manager tpm2-tools leaves the key loaded: flushed, untimed.
                try tool("tpm2_flushcontext", ["-t"], directory, tcti)
            }
            samples["TPMDevice.sign in this process (the TPM's share)", default: []].append(
                try Bench.time {
                    _ = try TPMDevice.sign(
                        digest: digest,
                        blob: inProcess.blob,
                        auth: auth,
                        tcti: tcti,
                        primary: primary
                    )
                }
            )
            for (name, enclave, key) in [
                ("SecKeyCreateSignature, TPM root (client → daemon → TPM)", onTPM, tpmKey),
                ("SecKeyCreateSignature, software root", onSoftware, softwareKey),
            ] {
                samples[name, default: []].append(
                    Bench.time {
                        let signature = enclave.run {
                            SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, nil)
                        }
                        precondition(signature != nil, "\(name) did not sign")
                    }
                )
            }
        }
        printTable(samples, heading: "signature, \(iterations) rounds", reference: "tpm2_sign")
    }

    /// The rows' p50 and p99, each p50 beside the row named `reference`'s (tpm2-tools, when here).
    static func printTable(_ samples: [String: [Double]], heading: String, reference: String) {
        let limit = samples.first { $0.key.hasPrefix(reference) }.map { Bench.percentile($0.value.sorted(), 0.5) }
        print("")
        print("| \(heading) | p50 | p99 | ÷ \(reference) p50 |")
        print("|---|---|---|---|")
        for (name, values) in samples.sorted(by: { $0.key < $1.key }) {
            let sorted = values.sorted()
            let p50 = Bench.percentile(sorted, 0.5)
            print(
                "| \(name) | \(Bench.micros(p50)) | \(Bench.micros(Bench.percentile(sorted, 0.99))) | \(limit.map { String(format: "%.2f", p50 / $0) } ?? "n/a") |"
            )
        }
    }

    /// A Secure Enclave key without access control (no prompt: the signature alone is timed).
    private static func key(on enclave: TestEnclave) throws -> SecKey {
        try enclave.run {
            var error: Unmanaged<CFError>?
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
            ]
            guard let key = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
                throw BenchError("no Secure Enclave key: \(String(describing: error?.takeRetainedValue()))")
            }
            return key
        }
    }

    /// tpm2-tools' key: the same storage primary as the daemon's, a P-256 key under it, loaded
    /// and its context saved (`key.ctx`), every object flushed after (no resource manager).
    private static func prepareTools(_ directory: String, tcti: String) throws {
        try createToolsPrimary(directory, tcti: tcti)
        try tool(
            "tpm2_create",
            ["-C", "primary.ctx", "-G", "ecc256:ecdsa-sha256", "-u", "key.pub", "-r", "key.priv"],
            directory,
            tcti
        )
        try tool("tpm2_flushcontext", ["-t"], directory, tcti)
        try tool(
            "tpm2_load",
            ["-C", "primary.ctx", "-u", "key.pub", "-r", "key.priv", "-c", "key.ctx"],
            directory,
            tcti
        )
        try tool("tpm2_flushcontext", ["-t"], directory, tcti)
    }

    /// The daemon's storage primary as tpm2-tools makes it (`primary.ctx`), after flushing what
    /// an earlier run left loaded (no resource manager).
    static func createToolsPrimary(_ directory: String, tcti: String) throws {
        try tool("tpm2_flushcontext", ["-t"], directory, tcti)
        try tool(
            "tpm2_createprimary",
            [
                "-C", "o", "-g", "sha256", "-G", "ecc256:aes128cfb", "-a",
                "restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda", "-c", "primary.ctx",
            ],
            directory,
            tcti
        )
    }

    static func tool(_ name: String, _ arguments: [String], _ directory: String, _ tcti: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/" + name)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var environment = ProcessInfo.processInfo.environment
        environment["TPM2TOOLS_TCTI"] = tcti
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("\(name) \(arguments) failed") }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
