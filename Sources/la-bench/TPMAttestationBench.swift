import EnclaveProtocol
import EnclaveServer
import Foundation
import LocalAuthenticationTesting

/// The TPM's statement about a key (issue 31, item 6), beside `tpm2_certify` on the same TPM in the
/// same run (tpm2-tools: a restricted attestation key and a P-256 key of its own under the same
/// storage primary, loaded back from their contexts each time): the daemon's whole path (socket,
/// daemon, the TPM's loads, certify and flushes) against one process of tpm2-tools; beside them
/// the TPM's share alone (`TPMDevice.certify` in this process). Rounds take turns.
enum TPMAttestationBench {
    static func run(iterations: Int, tcti: String) throws {
        let directory = NSTemporaryDirectory() + "la-bench-tpm-attest-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tools = FileManager.default.isExecutableFile(atPath: "/usr/bin/tpm2_certify")
        if tools { try prepareTools(directory, tcti: tcti) }

        let data = [UInt8](repeating: 0x5C, count: 32)
        try Data(data).write(to: URL(fileURLWithPath: directory + "/data"))
        let auth = [UInt8](repeating: 3, count: 32)
        let primary = TPMPrimaryContext()
        let key = try TPMDevice.createKey(signing: true, agreement: false, auth: auth, tcti: tcti, primary: primary)
        let attestationKey = try TPMDevice.createAttestationKey(auth: auth, tcti: tcti, primary: primary)

        var configuration = TestEnclave.Configuration()
        configuration.tpm = tcti
        let enclave = try TestEnclave(configuration)
        defer { enclave.stop() }
        guard
            case .key(let made) = try enclave.send(.key(KeyRequest(operation: .create, kind: .signing, context: "b"))),
            let blob = made.blob
        else { throw BenchError("no key from the daemon") }
        let certify = KeyRequest(operation: .tpmCertify, kind: .signing, blob: blob, digest: Data(data), context: "b")
        // The attestation key is made on first use: not timed.
        _ = try enclave.send(.key(certify))

        var samples: [String: [Double]] = [:]
        for _ in 0..<iterations {
            if tools {
                samples["tpm2_certify (one process: load both contexts, certify)", default: []].append(
                    try Bench.time {
                        try tool(
                            "tpm2_certify",
                            // Debian 12's tpm2_certify takes no qualifying data: 32 bytes fewer on the wire.
                            ["-c", "key.ctx", "-C", "ak.ctx", "-g", "sha256", "-o", "attest", "-s", "sig"],
                            directory,
                            tcti
                        )
                    }
                )
                try tool("tpm2_flushcontext", ["-t"], directory, tcti)
            }
            samples["TPMDevice.certify in this process (the TPM's share)", default: []].append(
                try Bench.time {
                    _ = try TPMDevice.certify(
                        key: key.blob,
                        keyAuth: auth,
                        attestationKey: attestationKey,
                        attestationAuth: auth,
                        qualifyingData: data,
                        tcti: tcti,
                        primary: primary
                    )
                }
            )
            samples["key.tpmCertification (client → daemon → TPM)", default: []].append(
                try Bench.time {
                    guard case .key(let reply) = try enclave.send(.key(certify)), reply.tpm?.certifyInfo != nil else {
                        throw BenchError("the daemon certified nothing")
                    }
                }
            )
        }
        TPMKeyBench.printTable(samples, heading: "certify statement, \(iterations) rounds", reference: "tpm2_certify")
    }

    /// tpm2-tools' keys: the daemon's storage primary, a restricted ECDSA attestation key and a
    /// P-256 key under it, both loaded and their contexts saved, every object flushed after.
    private static func prepareTools(_ directory: String, tcti: String) throws {
        try TPMKeyBench.createToolsPrimary(directory, tcti: tcti)
        for (name, attributes) in [
            ("ak", "restricted|sign|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda"),
            ("key", "sign|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda"),
        ] {
            try tool(
                "tpm2_create",
                [
                    "-C", "primary.ctx", "-G", "ecc256:ecdsa-sha256:null", "-a", attributes, "-u", "\(name).pub", "-r",
                    "\(name).priv",
                ],
                directory,
                tcti
            )
            try tool("tpm2_flushcontext", ["-t"], directory, tcti)
            try tool(
                "tpm2_load",
                ["-C", "primary.ctx", "-u", "\(name).pub", "-r", "\(name).priv", "-c", "\(name).ctx"],
                directory,
                tcti
            )
            try tool("tpm2_flushcontext", ["-t"], directory, tcti)
        }
    }

    private static func tool(_ name: String, _ arguments: [String], _ directory: String, _ tcti: String) throws {
        try TPMKeyBench.tool(name, arguments, directory, tcti)
    }
}
