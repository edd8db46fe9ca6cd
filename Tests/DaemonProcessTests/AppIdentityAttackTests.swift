import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The routes by which a process of the same user took another app's identity, each performed
/// against the daemon: the victim is this test process (its items are its own), the attacker
/// another program. Before the identity was pinned (`PeerProcess`, `AppIdentity`), each of them
/// read the victim's secret.
final class AppIdentityAttackTests: XCTestCase {
    private let service = "victim-secret"
    private let secret = Data("s3cret-of-the-victim".utf8)

    private func victimStoresItsSecret(in enclave: TestEnclave) {
        enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                        kSecValueData as String: secret,
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
    }

    private var me: String { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "" }

    private func frames(_ requests: [Request]) -> String {
        requests.enumerated().map { i, r in FrameEncoder.frame(RequestEnvelope(id: UInt64(i + 1), request: r).encoded())
        }
        .joined().map { String(format: "%02x", $0) }.joined()
    }

    private var readTheSecret: Request {
        .keychainCopy(
            KeychainRequest(
                attributes: ["class": .string("genp"), "svce": .string(service)],
                context: "attack",
                returnData: true
            )
        )
    }

    /// In a mount namespace of its own, a process bind-mounts its program over the victim's path:
    /// the kernel then names its executable with the victim's path. It runs another file, though.
    func testABindMountInAMountNamespaceOfItsOwnBorrowsNoIdentity() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else {
            throw XCTSkip("needs root and unshare(1) for a mount namespace")
        }
        let enclave = try TestEnclave()
        victimStoresItsSecret(in: enclave)
        let attack = try runProcess(
            "/usr/bin/unshare",
            [
                "-m", "--propagation", "private", "/bin/sh", "-c",
                "mount --bind \"$0\" \"$1\" && exec \"$1\" keychain get --service \"$2\" --socket \"$3\"",
                productPath("lactl"), me, service, enclave.socketPath,
            ]
        )
        XCTAssertFalse(
            attack.stdout.contains(String(decoding: secret, as: UTF8.self)),
            "the bind-mounted program read the victim's secret"
        )
        XCTAssertTrue(attack.stderr.contains("-25300"), "an unverified app has no items: \(attack.stderr)")
        // Nothing else changed for the victim.
        enclave.run {
            var result: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                        kSecReturnData as String: true,
                    ] as CFDictionary,
                    &result
                ),
                errSecSuccess
            )
            XCTAssertEqual(result as? Data, secret)
        }
    }

    /// The connecting process exec's the victim at once while the attacker keeps the socket: the
    /// daemon that reads the executable after the exec sees the victim. Tried 20 times.
    func testConnectingAndThenExecingTheVictimBorrowsNoIdentity() throws {
        let enclave = try TestEnclave()
        victimStoresItsSecret(in: enclave)
        let script = """
            import os, socket, sys, time
            path, victim, frames, needle, tries = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3]), sys.argv[4].encode(), int(sys.argv[5])
            mine = os.readlink('/proc/self/exe')
            wins = refused = 0
            for attempt in range(tries):
                s = socket.socket(socket.AF_UNIX)
                pid = os.fork()
                if pid == 0:
                    # The connector: connects, then becomes the victim (keeping nothing: Python's
                    # sockets are close-on-exec; the parent holds the same socket).
                    s.connect(path)
                    quiet = os.open('/dev/null', os.O_RDWR)
                    os.dup2(quiet, 1)
                    os.dup2(quiet, 2)
                    os.execv(victim, [victim, '--list-tests'])
                deadline = time.time() + 10
                while time.time() < deadline:
                    try:
                        s.getpeername()
                        if os.readlink('/proc/%d/exe' % pid) != mine:
                            break
                    except OSError:
                        pass
                    time.sleep(0.0005)
                s.settimeout(10)
                try:
                    s.sendall(frames)
                except OSError:
                    pass  # refused and closed already: its explanation is waiting to be read
                got = b''
                try:
                    while True:
                        chunk = s.recv(65536)
                        if not chunk:
                            break
                        got += chunk
                        if needle in got or got.count(b'"kind"') >= 2:
                            break
                except OSError:
                    pass
                if needle in got:
                    wins += 1
                elif b'notPermitted' in got:
                    refused += 1
                else:
                    print(repr(got), file=sys.stderr)
                s.close()
                os.waitpid(pid, 0)
            print(wins, refused)
            """
        let needle = secret.base64EncodedString()
        let run = try runProcess(
            "/usr/bin/python3",
            [
                "-c", script, enclave.socketPath, me,
                frames([.hello(.init(version: enclaveProtocolVersion)), readTheSecret]), needle, "20",
            ],
            timeout: 120
        )
        XCTAssertEqual(run.status, 0, run.stderr)
        let counts = run.stdout.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        XCTAssertEqual(counts.count, 2, run.stdout)
        XCTAssertEqual(
            counts.first,
            0,
            "connect-then-exec read the victim's secret in \(counts.first ?? -1) of 20 tries"
        )
        XCTAssertEqual(
            counts.last,
            20,
            "every try is refused as a client the daemon could not identify: \(run.stdout) \(run.stderr)"
        )
    }

    /// Two scripts run by one interpreter are one executable: the first one's secret would be the
    /// second one's. An interpreter keeps no items of its own.
    /// Another app sets the longest reuse window and asks without a prompt: before, the victim's
    /// fingerprint match (one user-wide "last match") passed it too, so any app could piggyback on
    /// every touch the person gave another app. Now only the app's own match counts.
    func testAnotherAppsMatchDoesNotPassTheReuseWindow() async throws {
        let enclave = try TestEnclave()
        let piggyback = [
            "authenticate", "--policy", "biometrics", "--reason", "Piggyback", "--reuse-duration", "300",
            "--no-interaction", "--socket", enclave.socketPath,
        ]
        try enclave.queue(.match)
        let victim = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertNil(victim, "the victim's own touch")
        let attack = try runProcess(productPath("lactl"), piggyback)
        XCTAssertEqual(attack.status, 30, "another app passed on the victim's touch: \(attack.stdout)\(attack.stderr)")

        // Its own match does count for it.
        try enclave.queue(.match)
        let own = try runProcess(
            productPath("lactl"),
            ["authenticate", "--policy", "biometrics", "--reason", "Own", "--socket", enclave.socketPath]
        )
        XCTAssertEqual(own.status, 0, own.stderr)
        let reused = try runProcess(productPath("lactl"), piggyback)
        XCTAssertEqual(reused.status, 0, "its own match within the window: \(reused.stderr)")
    }

    /// A script run by python3: sends the frames in argv[2] to the socket in argv[1] and prints
    /// what comes back until argv[3] replies have.
    private let script = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        s.sendall(bytes.fromhex(sys.argv[2]))
        s.settimeout(10)
        got = b''
        while got.count(b'"kind"') < int(sys.argv[3]):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        print(got.decode('utf-8', 'replace'))
        """

    func testOneScriptCannotReadAnotherScriptsSecret() throws {
        let enclave = try TestEnclave()
        let store = Request.keychainAdd(
            KeychainRequest(
                attributes: ["class": .string("genp"), "svce": .string(service), "v_Data": .data(secret)],
                context: "store"
            )
        )
        let first = try runProcess(
            "/usr/bin/python3",
            ["-c", script, enclave.socketPath, frames([.hello(.init(version: enclaveProtocolVersion)), store]), "2"]
        )
        XCTAssertTrue(
            first.stdout.contains("\(KeychainStatus.missingEntitlement.rawValue)"),
            "the interpreter's own item is refused: \(first.stdout)"
        )
        let second = try runProcess(
            "/usr/bin/python3",
            [
                "-c", script, enclave.socketPath,
                frames([.hello(.init(version: enclaveProtocolVersion)), readTheSecret]), "2",
            ]
        )
        XCTAssertFalse(
            second.stdout.contains(secret.base64EncodedString()),
            "another script read the first one's secret: \(second.stdout)"
        )
    }

    /// The TPM's endorsement names this machine: an interpreter, which runs anyone's scripts, gets
    /// none (any script could otherwise collect it, and the attestation key that links apps).
    func testAnInterpreterGetsNoTPMEndorsement() throws {
        guard SwtpmSimulator.available else { throw XCTSkip("needs swtpm (scripts/setup-debian installs it)") }
        let tpm = try SwtpmSimulator()
        defer { tpm.destroy() }
        let enclave = try TestEnclave.sealed(to: tpm)
        defer { enclave.stop() }
        let ask = Request.key(KeyRequest(operation: .tpmEndorsement, kind: .signing, context: "attack"))
        let run = try runProcess(
            "/usr/bin/python3",
            ["-c", script, enclave.socketPath, frames([.hello(.init(version: enclaveProtocolVersion)), ask]), "2"]
        )
        XCTAssertTrue(run.stdout.contains("runs other programs' code"), "the interpreter was answered: \(run.stdout)")
        XCTAssertFalse(run.stdout.contains("endorsementKey"), run.stdout)
    }
}
