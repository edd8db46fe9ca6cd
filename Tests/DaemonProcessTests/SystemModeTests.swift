import EnclaveClient
import Foundation
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// System mode serves every user and keeps each user's state apart; user mode refuses other
/// users by their kernel uid. Needs root (CI runs as root) to act as a second user.
final class SystemModeTests: XCTestCase {
    private func requireRoot() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") else {
            throw XCTSkip("needs root and runuser to act as a second user")
        }
    }

    /// lactl copied where the unprivileged user can run it.
    private func lactl(in enclave: TestEnclave) throws -> String {
        let path = enclave.directory + "/lactl"
        if !FileManager.default.fileExists(atPath: path) {
            try FileManager.default.copyItem(atPath: productPath("lactl"), toPath: path)
        }
        chmod(path, 0o755)
        return path
    }

    private func asNobody(_ arguments: [String], input: String = "") throws -> ProcessOutput {
        try runProcess(
            "/usr/sbin/runuser",
            ["-u", "nobody", "--"] + arguments,
            input: input,
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/tmp"]
        )
    }

    func testASecondUserCannotSeeOrChangeTheFirstUsersState() throws {
        try requireRoot()
        let enclave = try TestEnclave(.with { $0.systemMode = true })
        let lactl = try lactl(in: enclave)
        // Root (this test) has a passcode and an enrolled finger.
        XCTAssertTrue(try enclave.status().passcodeSet)
        let status = try asNobody([lactl, "status", "--json", "--socket", enclave.socketPath])
        XCTAssertEqual(status.status, 0, status.stderr)
        let json = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as! [String: Any]
        XCTAssertEqual(json["uid"] as? Int, 65534, "identified by the kernel, not by what it says")
        XCTAssertEqual(json["passcodeSet"] as? Bool, false, "nobody sees its own state, not root's")
        XCTAssertEqual(json["enrolledCount"] as? Int, 0)
        XCTAssertEqual(json["mode"] as? String, "system")

        let auth = try asNobody([
            lactl, "authenticate", "--socket", enclave.socketPath, "--reason", "x", "--no-interaction",
        ])
        XCTAssertEqual(auth.status, 15, "passcodeNotSet for nobody: \(auth.stderr)")

        let admin = try asNobody([lactl, "admin", "remote-lock", "--uid", "0", "--socket", enclave.socketPath])
        XCTAssertEqual(admin.status, 1)
        XCTAssertTrue(admin.stderr.contains("only root"), admin.stderr)
        XCTAssertNil(try enclave.status().biometryLockout, "root's state is untouched")

        // A user cannot lift their own passcode counter in system mode: that would make guessing free.
        let reset = try asNobody([lactl, "admin", "reset-passcode", "--socket", enclave.socketPath])
        XCTAssertEqual(reset.status, 1)
        XCTAssertTrue(reset.stderr.contains("only root"), reset.stderr)

        // Nobody's own failures do not touch root's counters.
        XCTAssertEqual(
            try asNobody([lactl, "passcode", "set", "--stdin", "--socket", enclave.socketPath], input: "9876\n").status,
            0
        )
        _ = try asNobody([lactl, "enroll", "x", "--stdin", "--socket", enclave.socketPath], input: "0000\n")
        XCTAssertEqual(try enclave.status().passcodeFailures, 0)
        let nobodyAfter = try asNobody([lactl, "status", "--json", "--socket", enclave.socketPath])
        XCTAssertTrue(
            nobodyAfter.stdout.contains("\"passcodeFailures\" : 1"),
            "the failed guess stays counted: \(nobodyAfter.stdout)"
        )

        // The state directory and database are unreadable to other users.
        let peek = try asNobody(["/bin/cat", enclave.stateDirectory + "/enclave.sqlite"])
        XCTAssertNotEqual(peek.status, 0)
        var st = stat()
        stat(enclave.stateDirectory, &st)
        XCTAssertEqual(st.st_mode & 0o777, 0o700)
        stat(enclave.stateDirectory + "/enclave.sqlite", &st)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)

        // Keychain items are per user: root's item does not exist for nobody, even for the same app.
        enclave.run {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "root-only",
                        kSecValueData as String: Data("r00t".utf8),
                    ] as CFDictionary,
                    nil
                ),
                errSecSuccess
            )
        }
        try FileManager.default.copyItem(atPath: lactl, toPath: enclave.directory + "/lactl-shared")
        chmod(enclave.directory + "/lactl-shared", 0o755)
        let sharedApp = enclave.directory + "/lactl-shared"
        _ = try runProcess(
            sharedApp,
            ["keychain", "share", "everyone", sharedApp, "--stdin", "--socket", enclave.socketPath],
            input: "1234\n"
        )
        let nobodyRead = try asNobody([
            sharedApp, "keychain", "get", "--service", "root-only", "--socket", enclave.socketPath,
        ])
        XCTAssertNotEqual(nobodyRead.status, 0)
        XCTAssertFalse(nobodyRead.stdout.contains("r00t"))
        let nobodyList = try asNobody(
            [lactl, "keychain", "list", "--stdin", "--socket", enclave.socketPath],
            input: "9876\n"
        )
        XCTAssertTrue(nobodyList.stdout.contains("no items"), nobodyList.stdout + nobodyList.stderr)

        // Root may administer another user in system mode.
        try enclave.send(.remoteLock(.init(uid: 65534)))
        let after = try asNobody([lactl, "status", "--json", "--socket", enclave.socketPath])
        XCTAssertTrue(after.stdout.contains("remoteLock"), after.stdout)
    }

    func testAUserModeDaemonRefusesOtherUsersByTheirUID() throws {
        try requireRoot()
        let enclave = try TestEnclave()
        let lactl = try lactl(in: enclave)
        // Open the socket's permissions so only the daemon's own uid check stands in the way.
        chmod(enclave.directory + "/run", 0o755)
        chmod(enclave.socketPath, 0o666)
        let out = try asNobody([lactl, "status", "--json", "--socket", enclave.socketPath])
        XCTAssertEqual(out.status, 69, out.stdout + out.stderr)
        eventually("the refusal to be logged") { enclave.log().contains("refused a connection from another user") }
    }

    func testClientsRefuseADaemonRunByAnotherUser() throws {
        try requireRoot()
        var template = Array("/tmp/la-impostor-XXXXXX".utf8CString)
        let root = String(cString: mkdtemp(&template)!)
        chmod(root, 0o777)
        defer {
            _ = try? runProcess("/usr/bin/pkill", ["-f", root])
            try? FileManager.default.removeItem(atPath: root)
        }
        // An unprivileged user runs a daemon and waits for someone to hand it a passcode.
        let daemon = root + "/laenclaved"
        try FileManager.default.copyItem(atPath: productPath("laenclaved"), toPath: daemon)
        chmod(daemon, 0o755)
        let impostor = try DaemonLauncher.spawn(
            "/usr/sbin/runuser",
            [
                "-u", "nobody", "--", daemon, "--user", "--socket", root + "/run/socket", "--state-dir",
                root + "/state", "--key-file", root + "/keys/master.key", "--passcode-cost", "10",
            ]
        )
        defer { terminateAndWait(impostor) }
        eventually("the impostor's socket") { FileManager.default.fileExists(atPath: root + "/run/socket") }
        chmod(root + "/run", 0o755)
        chmod(root + "/run/socket", 0o666)
        XCTAssertThrowsError(try EnclaveConnection(socketPath: root + "/run/socket")) { error in
            XCTAssertTrue("\(error)".contains("not a trusted laenclaved"), "\(error)")
        }
    }

    func testTheDaemonRefusesASocketDirectoryOwnedBySomeoneElse() throws {
        try requireRoot()
        var template = Array("/tmp/la-foreign-XXXXXX".utf8CString)
        let root = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/run", withIntermediateDirectories: true)
        chown(root + "/run", 65534, 65534)
        let out = try runProcess(
            productPath("laenclaved"),
            ["--user", "--socket", root + "/run/socket", "--state-dir", root + "/state"]
        )
        XCTAssertNotEqual(out.status, 0)
        XCTAssertTrue(out.stderr.contains("refusing to listen"), out.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/run/socket"))
    }
}
