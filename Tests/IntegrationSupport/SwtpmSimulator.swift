import EnclaveClient
import Foundation
import LocalAuthenticationTesting
import XCTest

/// A TPM 2.0 for a test: Debian's `swtpm` on a loopback TCP port of its own, with its state in a
/// directory of its own (a second one is another TPM: other seeds, other keys). `tcti` names it
/// in tpm2-tss's syntax, for the daemon's `--tpm` and for tpm2-tools (`TPM2TOOLS_TCTI`).
public final class SwtpmSimulator {
    public static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm") }
    /// Whether `swtpm_setup` (swtpm-tools) is here to manufacture an endorsed TPM.
    public static var manufacturable: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm_setup") }

    public let tcti: String
    public let port: Int
    private let directory: String
    private var pid: pid_t = 0
    /// With `endorsed`: the local CA's root and issuing certificates (PEM files) that the
    /// endorsement key's certificate chains to, as a TPM maker's would.
    public private(set) var endorsementRoot: String?
    public private(set) var endorsementIssuer: String?

    /// `endorsed`: manufactured first by `swtpm_setup`, with ECC P-384 and RSA endorsement keys and
    /// their certificates in NV, issued by a local CA of this simulator's own (never the machine's
    /// /var/lib/swtpm-localca).
    public init(endorsed: Bool = false) throws {
        var template = Array("/tmp/la-swtpm-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SimulatorError(description: "no directory for swtpm") }
        directory = String(cString: made)
        // Two free ports in a row: the TPM's and its control channel (which the TCTI expects at port + 1).
        port = try Self.freePortPair()
        tcti = "swtpm:host=127.0.0.1,port=\(port)"
        do {
            if endorsed { try manufacture() }
            try start()
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: directory + "-ca")
            throw error
        }
    }

    private func manufacture() throws {
        let ca = directory + "-ca"
        try FileManager.default.createDirectory(atPath: ca, withIntermediateDirectories: false)
        let files: [(String, String)] = [
            (
                "swtpm_setup.conf",
                "create_certs_tool = \(ca)/localca\ncreate_certs_tool_config = \(ca)/swtpm-localca.conf\n"
                    + "create_certs_tool_options = \(ca)/swtpm-localca.options\nactive_pcr_banks = sha256\n"
            ),
            // swtpm names its maker by IBM's PCI vendor ID (id:00001014); a maker's certificate
            // names it as the TCG's vendor registry does, "IBM\0" (id:49424D00), which is also what
            // this TPM reports as TPM_PT_MANUFACTURER and what WebAuthn verifiers look up.
            ("localca", "#!/bin/bash\nexec /usr/bin/swtpm_localca \"${@/#id:00001014/id:49424D00}\"\n"),
            (
                "swtpm-localca.conf",
                "statedir = \(ca)\nsigningkey = \(ca)/signkey.pem\nissuercert = \(ca)/issuercert.pem\n"
                    + "certserial = \(ca)/certserial\n"
            ),
            (
                "swtpm-localca.options",
                "--platform-manufacturer LAEnclaveTests\n--platform-version 2.1\n--platform-model swtpm\n"
            ),
        ]
        for (name, text) in files { try text.write(toFile: ca + "/" + name, atomically: true, encoding: .utf8) }
        chmod(ca + "/localca", 0o755)
        let setup = try runProcess(
            "/usr/bin/swtpm_setup",
            [
                "--tpm2", "--tpmstate", directory, "--config", ca + "/swtpm_setup.conf", "--ecc", "--create-ek-cert",
                "--overwrite",
            ]
        )
        guard setup.status == 0 else {
            throw SimulatorError(description: "swtpm_setup failed: \(setup.stdout) \(setup.stderr)")
        }
        endorsementRoot = ca + "/swtpm-localca-rootca-cert.pem"
        endorsementIssuer = ca + "/issuercert.pem"
    }

    deinit { destroy() }

    /// Starts the simulator on its state (again, after `stop`: the same TPM).
    public func start() throws {
        pid = try DaemonLauncher.spawn(
            "/usr/bin/swtpm",
            [
                "socket", "--tpm2", "--tpmstate", "dir=\(directory)",
                "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
                "--flags", "not-need-init,startup-clear",
            ],
            inherit: false
        )
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                pid = 0
                throw SimulatorError(description: "swtpm exited at start (port \(port) taken?)")
            }
            if Self.accepts(port) { return }
            usleep(20_000)
        }
        stop()
        throw SimulatorError(description: "swtpm did not listen on port \(port)")
    }

    /// Stops the simulator (its state stays, as a machine's TPM through a reboot).
    public func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        pid = 0
    }

    /// A TPM clear (or a new mainboard at the same address): new seeds, its NV gone; the same TCTI.
    public func clear() throws {
        stop()
        try FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        try start()
    }

    /// Removes the TPM's state: the end of this TPM.
    public func destroy() {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
        try? FileManager.default.removeItem(atPath: directory + "-ca")
    }

    private static func accepts(_ port: Int) -> Bool { onLoopback(port) { connect($0, $1, $2) == 0 } }

    private static func bindable(_ port: Int) -> Bool { onLoopback(port) { bind($0, $1, $2) == 0 } }

    /// `body` with a new TCP socket and 127.0.0.1:`port`; the socket is closed after.
    private static func onLoopback(_ port: Int, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                body(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }

    private static func freePortPair() throws -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000..<60_000)
            if bindable(port) && bindable(port + 1) { return port }
        }
        throw SimulatorError(description: "no two free loopback ports for swtpm")
    }

    public struct SimulatorError: Error, CustomStringConvertible { public var description: String }
}

extension TestEnclave {
    /// A test daemon whose master secret is sealed to `tpm`.
    public static func sealed(to tpm: SwtpmSimulator) throws -> TestEnclave {
        var configuration = TestEnclave.Configuration()
        configuration.tpm = tpm.tcti
        return try TestEnclave(configuration)
    }

    /// This daemon stopped, its state directory and (when `keyFile`) its key file replaced by
    /// `source`'s, as a copy taken elsewhere would be.
    public func takeState(of source: TestEnclave, keyFile: Bool = true) throws {
        stop()
        let files = FileManager.default
        try files.removeItem(atPath: stateDirectory)
        try files.copyItem(atPath: source.stateDirectory, toPath: stateDirectory)
        guard keyFile else { return }
        try files.removeItem(atPath: directory + "/keys/master.key")
        try files.copyItem(atPath: source.directory + "/keys/master.key", toPath: directory + "/keys/master.key")
    }

    /// The daemon's executable run once more on this daemon's state and key file with `tpm`, for a
    /// one-shot of root's (`--reanchor`, `--recover-tpm-root`), while the daemon is stopped.
    public func runOnce(tpm: SwtpmSimulator, _ arguments: [String], input: String = "") throws -> ProcessOutput {
        try runProcess(
            productPath("laenclaved"),
            [
                "--user", "--socket", directory + "/run/one-shot-socket", "--state-dir", stateDirectory, "--key-file",
                directory + "/keys/master.key", "--config", directory + "/laenclaved.conf", "--tpm", tpm.tcti,
            ] + arguments,
            input: input
        )
    }
}
