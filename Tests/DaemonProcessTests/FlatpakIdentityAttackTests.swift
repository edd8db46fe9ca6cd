import CPeerSocket
import EnclaveProtocol
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Flatpak apps against the daemon, with the real flatpak and bubblewrap (`FlatpakInstallation`).
///
/// Before a Flatpak app was verified as such, every client in a mount namespace of its own was
/// named by the file it runs: two Flatpak apps running one runtime's program (every Python app on
/// one runtime runs its `python3`) were one app, and read each other's secrets; one without network
/// access was refused outright (its connection is in a network namespace of its own, where the
/// daemon cannot see it). Now a Flatpak app is
/// its app id, but only with a live instance of its own: a forged `/.flatpak-info` — naming no
/// instance, or another app's live one — is believed by nothing.
final class FlatpakIdentityAttackTests: XCTestCase {
    private static let victim = "org.laenclaved.Victim"
    private static let other = "org.laenclaved.Other"
    private let service = "flatpak-secret"
    private let secret = Data("s3cret-of-the-flatpak-app".utf8)

    private var installation: FlatpakInstallation!
    private var enclave: TestEnclave!

    override func setUpWithError() throws {
        installation = try FlatpakInstallation(apps: [Self.victim, Self.other])
        enclave = try TestEnclave()
    }

    override func tearDown() {
        enclave = nil
        installation?.remove(apps: [Self.victim, Self.other])
    }

    private func frames(_ requests: [Request]) -> String {
        requests.enumerated().map { i, r in FrameEncoder.frame(RequestEnvelope(id: UInt64(i + 1), request: r).encoded())
        }
        .joined().map { String(format: "%02x", $0) }.joined()
    }

    private var store: Request {
        .keychainAdd(
            KeychainRequest(
                attributes: ["class": .string("genp"), "svce": .string(service), "v_Data": .data(secret)],
                context: "store"
            )
        )
    }

    private var read: Request {
        .keychainCopy(
            KeychainRequest(
                attributes: ["class": .string("genp"), "svce": .string(service)],
                context: "read",
                returnData: true
            )
        )
    }

    /// The replies a client printed: its identity (hello) and its keychain request's status.
    private func outcome(
        _ output: ProcessOutput,
        file: StaticString = #filePath,
        line: UInt = #line
    ) -> (app: String, status: KeychainStatus?, raw: String) {
        let replies = output.stdout.split(separator: "\n").compactMap {
            try? ReplyEnvelope.decode(Array($0.utf8)).reply
        }
        guard replies.count == 2, case .hello(let hello) = replies[0] else {
            XCTFail(
                "the client got no hello and keychain reply: \(output.stdout) \(output.stderr)",
                file: file,
                line: line
            )
            return ("", nil, output.stdout)
        }
        guard case .keychain(let reply) = replies[1] else { return (hello.app, nil, output.stdout) }
        return (hello.app, reply.status, output.stdout)
    }

    private func client(
        _ app: String,
        _ request: Request,
        network: Bool = true
    ) throws -> (app: String, status: KeychainStatus?, raw: String) {
        outcome(
            try installation.run(
                app,
                socket: enclave.socketPath,
                frames: frames([.hello(.init(version: enclaveProtocolVersion)), request]),
                replies: 2,
                network: network
            )
        )
    }

    /// A Flatpak app is its app id in every instance; another app running the very same program
    /// (the runtime's) reads nothing of it. Before: both were `unverified:DEV:INODE:/usr/bin/…`, one
    /// app, and the other app read the secret.
    func testAnotherFlatpakAppRunningTheSameProgramReadsNothing() throws {
        let stored = try client(Self.victim, store)
        XCTAssertEqual(stored.app, "flatpak:\(Self.victim)", stored.raw)
        XCTAssertEqual(stored.status, .success, stored.raw)
        let again = try client(Self.victim, read)
        XCTAssertEqual(again.app, "flatpak:\(Self.victim)", "a new instance is the same app")
        XCTAssertTrue(
            again.raw.contains(secret.base64EncodedString()),
            "the app reads its own secret in its next instance: \(again.raw)"
        )

        let other = try client(Self.other, read)
        XCTAssertEqual(other.app, "flatpak:\(Self.other)")
        XCTAssertEqual(other.status, .itemNotFound, "another Flatpak app read the secret: \(other.raw)")
        XCTAssertFalse(other.raw.contains(secret.base64EncodedString()))
    }

    /// A Flatpak app without network access has a network namespace of its own, where the daemon
    /// cannot look for its connection; it is served as its app id all the same. Before: refused
    /// as a client the daemon could not identify.
    func testAFlatpakAppWithoutNetworkAccessIsServedAsItself() throws {
        guard Self.kernelGivesPidfds else {
            throw XCTSkip("needs SO_PEERPIDFD (Linux 6.5): without it such an app is refused, by design")
        }
        let stored = try client(Self.victim, store, network: false)
        XCTAssertEqual(stored.app, "flatpak:\(Self.victim)", stored.raw)
        XCTAssertEqual(stored.status, .success, stored.raw)
        let read = try client(Self.victim, read)
        XCTAssertTrue(
            read.raw.contains(secret.base64EncodedString()),
            "the same app, with network access, reads it: \(read.raw)"
        )
    }

    /// The person shares a group with a Flatpak app by its app id, as with any app; no group may
    /// take a Flatpak app's name (it would hand over that app's items).
    func testAGroupSharedWithAFlatpakAppReachesThatAppOnly() throws {
        let lactl = productPath("lactl")
        let socket = ["--socket", enclave.socketPath]
        let share = try runProcess(
            lactl,
            ["keychain", "share", "team", "flatpak:\(Self.victim)", lactl, "--stdin"] + socket,
            input: "1234\n"
        )
        XCTAssertEqual(share.status, 0, share.stderr)
        let shared = Request.keychainAdd(
            KeychainRequest(
                attributes: [
                    "class": .string("genp"), "svce": .string(service), "agrp": .string("team"),
                    "v_Data": .data(secret),
                ],
                context: "store"
            )
        )
        XCTAssertEqual(try client(Self.victim, shared).status, .success, "the member Flatpak app stores in the group")
        let member = try runProcess(lactl, ["keychain", "get", "--service", service] + socket)
        XCTAssertEqual(
            member.stdout,
            String(decoding: secret, as: UTF8.self),
            "another member reads it: \(member.stderr)"
        )
        let sharedRead = Request.keychainCopy(
            KeychainRequest(
                attributes: ["class": .string("genp"), "svce": .string(service), "agrp": .string("team")],
                context: "read",
                returnData: true
            )
        )
        let outsider = try client(Self.other, sharedRead)
        XCTAssertEqual(
            outsider.status,
            .itemNotFound,
            "a Flatpak app outside the group finds nothing in it: \(outsider.raw)"
        )
        XCTAssertFalse(outsider.raw.contains(secret.base64EncodedString()))
        let impersonation = try runProcess(
            lactl,
            ["keychain", "share", "flatpak:\(Self.victim)", lactl, "--stdin"] + socket,
            input: "1234\n"
        )
        XCTAssertNotEqual(impersonation.status, 0, "a group named like a Flatpak app")
    }

    /// `/.flatpak-info` is only a file: bubblewrap (or `unshare`) puts any such file in a root of
    /// the attacker's. With no instance behind it, it names nothing.
    func testAFlatpakInfoWithNoInstanceBorrowsNothing() throws {
        XCTAssertEqual(try client(Self.victim, store).status, .success)
        let forged = tmpfsFile("forged-info")
        defer { try? FileManager.default.removeItem(atPath: forged) }
        try
            "[Application]\nname=\(Self.victim)\nruntime=runtime/\(FlatpakInstallation.runtime)/x86_64/1\n\n[Instance]\ninstance-id=4242424242\n"
            .write(toFile: forged, atomically: true, encoding: .utf8)
        assertBorrowsNothing(
            try forgedSandbox(info: forged, frames: frames([.hello(.init(version: enclaveProtocolVersion)), read])),
            verdict: "noInstanceRecord"
        )
    }

    /// The forgery made complete: the victim's live instance's very own `info`, so the record it
    /// names is there and matches — but that instance's sandbox is not the attacker's namespace.
    func testAFlatpakInfoNamingTheVictimsLiveInstanceBorrowsNothing() throws {
        XCTAssertEqual(try client(Self.victim, store).status, .success)
        let running = try installation.start(Self.victim)
        defer { running.end() }
        var record: String?
        for _ in 0..<100 where record == nil {
            record = installation.instances(of: Self.victim).first { !running.earlier.contains($0) }
            if record == nil { usleep(50_000) }
        }
        let instance = try XCTUnwrap(record, "the victim's instance record appears")
        let copy = tmpfsFile("copied-info")
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.copyItem(atPath: instance + "/info", toPath: copy)
        // The record it names is read, and matches; the instance's namespace is not the attacker's.
        assertBorrowsNothing(
            try forgedSandbox(info: copy, frames: frames([.hello(.init(version: enclaveProtocolVersion)), read])),
            verdict: "otherNamespace"
        )
    }

    /// Served without the connection check is only a verified app: any other client in a network
    /// namespace of its own — a forged claim's, here — is refused as before.
    func testAnUnverifiedClientInANetworkNamespaceOfItsOwnIsRefused() throws {
        let forged = tmpfsFile("forged-info")
        defer { try? FileManager.default.removeItem(atPath: forged) }
        try "[Application]\nname=\(Self.victim)\n\n[Instance]\ninstance-id=4242424242\n".write(
            toFile: forged,
            atomically: true,
            encoding: .utf8
        )
        let output = try forgedSandboxOutput(
            info: forged,
            frames: frames([.hello(.init(version: enclaveProtocolVersion)), read]),
            network: false
        )
        XCTAssertTrue(
            output.stdout.contains("notPermitted") && output.stdout.contains("could not identify"),
            "refused: \(output.stdout) \(output.stderr)"
        )
        XCTAssertFalse(output.stdout.contains("\"hello\""))
    }

    /// The read rule, shown with a real process: a client whose root is not tmpfs mounts a tmpfs
    /// over it, so that its mount table shows tmpfs at `/`; its `/.flatpak-info` is looked up in the
    /// root below, though — which with FUSE (or overlayfs over FUSE) below could hang the read for
    /// good. The daemon judges the root the kernel resolves, and reads nothing.
    func testATmpfsStackedOverTheRootDoesNotMakeTheClaimReadable() throws {
        // Beside the build, on disk: the root below must not be tmpfs (as /tmp is on some systems).
        let jail =
            (productPath("lactl") as NSString).deletingLastPathComponent + "/la-jail-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: jail) }
        try FileManager.default.createDirectory(atPath: jail, withIntermediateDirectories: true)
        try "[Application]\nname=\(Self.victim)\n\n[Instance]\ninstance-id=4242424242\n".write(
            toFile: jail + "/.flatpak-info",
            atomically: true,
            encoding: .utf8
        )
        let socketDirectory = (enclave.socketPath as NSString).deletingLastPathComponent
        let output = try runProcess(
            "/usr/bin/bwrap",
            [
                "--unshare-user", "--cap-add", "CAP_SYS_ADMIN", "--bind", jail, "/", "--ro-bind",
                installation.installedClient, "/la-sandbox-client",
                "--bind", socketDirectory, socketDirectory, "--proc", "/proc", "--dev", "/dev",
                "/la-sandbox-client", "stacked", enclave.socketPath,
                frames([.hello(.init(version: enclaveProtocolVersion)), read]), "2",
            ]
        )
        let attack = outcome(output)
        XCTAssertTrue(attack.app.hasPrefix("unverified:"), attack.raw)
        XCTAssertEqual(verdicts(including: "noInstanceRecord"), "", "the claim on a root that is not tmpfs was read")
    }

    /// The hang itself: a client whose root is a FUSE file system that never answers a lookup. A
    /// daemon that looked `/.flatpak-info` up there would wait as long as the client likes — in
    /// system mode, the helper that pins every user's clients. The daemon asks that root nothing,
    /// and answers. (FUSE serves the user who mounted it — fusermount's, for an ordinary user —
    /// or, through overlayfs over it, anyone; root mounts it here, for the root-run daemon.)
    func testARootThatNeverAnswersDoesNotHoldTheDaemon() throws {
        guard getuid() == 0, FileManager.default.fileExists(atPath: "/dev/fuse") else {
            throw XCTSkip("needs root and /dev/fuse")
        }
        let mountPoint = installation.directory + "/fuse-root"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let output = try runProcess(
            "/usr/bin/unshare",
            [
                "-m", "--propagation", "private",
                installation.installedClient, "fuseroot", mountPoint, enclave.socketPath,
                frames([.hello(.init(version: enclaveProtocolVersion)), read]), "2",
            ],
            timeout: 30
        )
        XCTAssertFalse(
            output.stderr.contains("timeout"),
            "the daemon waited on the client's file system: \(output.stderr)"
        )
        XCTAssertFalse(outcome(output).app.isEmpty, "the daemon answered: \(output.stdout) \(output.stderr)")
    }

    /// A client in a mount namespace of its own holds leases on its own mount table and cgroup
    /// record, which the daemon reads when it pins it: a blocking open would wait 45 s — in system
    /// mode, the helper, for every user (libsystemd's `sd_pid_get_session` did, on the cgroup). The
    /// daemon opens them without waiting, and answers.
    func testALeaseOnTheClientsOwnProcFilesDoesNotHoldTheDaemon() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root for a mount namespace") }
        let output = try runProcess(
            "/usr/bin/unshare",
            [
                "-m", "--propagation", "private",
                installation.installedClient, "lease", enclave.socketPath,
                frames([.hello(.init(version: enclaveProtocolVersion)), read]), "2",
            ],
            timeout: 60
        )
        XCTAssertFalse(output.stderr.contains("timeout"), "the daemon waited on the client's lease: \(output.stderr)")
        XCTAssertFalse(outcome(output).app.isEmpty, "the daemon answered: \(output.stdout) \(output.stderr)")
    }

    /// Whether this kernel names a socket's peer by pidfd (SO_PEERPIDFD, Linux 6.5).
    private static var kernelGivesPidfds: Bool {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0 else { return false }
        defer {
            close(ends[0])
            close(ends[1])
        }
        var pidfd: Int32 = -1
        var size = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(ends[0], SOL_SOCKET, la_so_peerpidfd, &pidfd, &size) == 0 else { return false }
        close(pidfd)
        return true
    }

    /// What every forged claim must come to: an unverified app of its own that reads nothing of the
    /// victim's, with the daemon's verdict on the claim in its log.
    private func assertBorrowsNothing(
        _ attack: (app: String, status: KeychainStatus?, raw: String),
        verdict: String,
        file: StaticString = #filePath,
        line: UInt = #line
    ) {
        XCTAssertTrue(
            attack.app.hasPrefix("unverified:"),
            "a forged claim is not believed: \(attack.raw)",
            file: file,
            line: line
        )
        let verdicts = verdicts(including: verdict)
        XCTAssertTrue(
            verdicts.contains(verdict),
            "the claim was read, and judged \(verdict): \(verdicts)",
            file: file,
            line: line
        )
        XCTAssertNotEqual(
            attack.status,
            .success,
            "the forged Flatpak read the victim's secret: \(attack.raw)",
            file: file,
            line: line
        )
        XCTAssertFalse(attack.raw.contains(secret.base64EncodedString()), file: file, line: line)
    }

    /// A file on tmpfs: bound as `/.flatpak-info`, it lies on tmpfs as flatpak's own does, so the
    /// daemon reads it (it reads no claim from a file system a program could make it wait on).
    private func tmpfsFile(_ name: String) -> String { "/dev/shm/la-\(UUID().uuidString.prefix(8))-\(name)" }

    /// The daemon's verdicts on the Flatpak claims it read (its log), once `expected` is among
    /// them or after two seconds (the log is written beside the replies, not before them).
    private func verdicts(including expected: String) -> String {
        var lines = ""
        for _ in 0..<40 {
            lines = ((try? String(contentsOfFile: enclave.logPath, encoding: .utf8)) ?? "").split(separator: "\n")
                .filter { $0.contains("claims to be a Flatpak app") }.joined(separator: "\n")
            if lines.contains(expected) { break }
            usleep(50_000)
        }
        return lines
    }

    /// The attacker's own sandbox, as bubblewrap makes it (a tmpfs root, so the daemon does read
    /// the claim), with `info` as its `/.flatpak-info`, running the very program the apps run (so
    /// that before the apps were told apart, it would have been one of them).
    private func forgedSandbox(
        info: String,
        frames: String
    ) throws -> (app: String, status: KeychainStatus?, raw: String) {
        outcome(try forgedSandboxOutput(info: info, frames: frames))
    }

    /// The same, as the process printed it; `network: false` gives it a network namespace of its own.
    private func forgedSandboxOutput(info: String, frames: String, network: Bool = true) throws -> ProcessOutput {
        let socketDirectory = (enclave.socketPath as NSString).deletingLastPathComponent
        return try runProcess(
            "/usr/bin/bwrap",
            (network ? [] : ["--unshare-net"]) + [
                "--unshare-user", "--unshare-pid", "--tmpfs", "/", "--ro-bind", installation.installedClient,
                "/usr/bin/la-sandbox-client",
                "--ro-bind", info, "/.flatpak-info", "--bind", socketDirectory, socketDirectory, "--proc", "/proc",
                "--dev", "/dev",
                "/usr/bin/la-sandbox-client", enclave.socketPath, frames, "2",
            ]
        )
    }
}
