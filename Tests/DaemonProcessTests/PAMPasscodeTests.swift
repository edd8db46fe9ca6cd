import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The device passcode as the user's login password, checked through PAM, with our attempt rules
/// on top. A throw-away user and a dedicated PAM service (pam_unix without its failure delay).
final class PAMPasscodeTests: XCTestCase {
    func testTheLoginPasswordIsThePasscodeAndTheRulesStillCount() throws {
        let asUser = try pamDaemon(stack: "auth required pam_unix.so nodelay\naccount required pam_unix.so\n")
        let (enclave, password) = (asUser.enclave, asUser.password)

        let status = try asUser(["status", "--json"])
        XCTAssertTrue(
            status.stdout.contains("\"passcodeSet\" : true"),
            "a PAM user always has a passcode: \(status.stdout)\(status.stderr)"
        )
        XCTAssertFalse(try enclave.status().passcodeSet, "root is not in pam-users: its own passcode, none set")

        XCTAssertEqual(try asUser(["simulate", "passcode=\(password)"]).status, 0)
        let ok = try asUser(["authenticate", "--policy", "deviceOwnerAuthentication", "--reason", "Sign the release"])
        XCTAssertEqual(ok.status, 0, ok.stdout + ok.stderr)

        let wrong = try asUser(["keychain", "list", "--stdin"], input: "not-my-password\n")
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.stderr.contains("not correct"), wrong.stderr)
        XCTAssertTrue(
            try asUser(["status", "--json"]).stdout.contains("\"passcodeFailures\" : 1"),
            "our counter counts PAM's refusals"
        )
        // The same wrong password again is a new attempt: a PAM stack (pam_fprintd) may have tried
        // a fingerprint with it, so no refusal of PAM's is a free repeat.
        XCTAssertNotEqual(try asUser(["keychain", "list", "--stdin"], input: "not-my-password\n").status, 0)
        XCTAssertTrue(
            try asUser(["status", "--json"]).stdout.contains("\"passcodeFailures\" : 2"),
            "each refusal counts"
        )
        let right = try asUser(["keychain", "list", "--stdin"], input: password + "\n")
        XCTAssertEqual(right.status, 0, right.stderr)

        let change = try asUser(["passcode", "set", "--stdin"], input: "1234\n")
        XCTAssertNotEqual(change.status, 0)
        XCTAssertTrue(change.stderr.contains("login password"), change.stderr)
        XCTAssertFalse(enclave.log().contains(password), "the password never reaches the log")
        XCTAssertFalse(
            try String(contentsOfFile: enclave.stateDirectory + "/enclave.sqlite", encoding: .isoLatin1).contains(
                password
            ),
            "nor the disk"
        )
    }

    /// A stack that can succeed without the password — pam_fprintd on a finger, pam_u2f on a token;
    /// here pam_rootok, which succeeds for the daemon itself (root) — would have any typed string
    /// recorded as a passcode success. Before, the wrong password opened the user's keychain
    /// listing; now the daemon refuses the stack with a clear error and counts nothing.
    func testAStackThatTakesAnotherFactorIsNotAPasscode() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to write a PAM service") }
        // The other factor hides one include down, as pam-auth-update writes common-auth.
        let common = "laenclaved-test-common-\(UInt32.random(in: 100_000...999_999))"
        try
            "auth [success=2 default=ignore] pam_rootok.so\nauth [success=1 default=ignore] pam_unix.so nodelay\nauth requisite pam_deny.so\nauth required pam_permit.so\n"
            .write(toFile: "/etc/pam.d/\(common)", atomically: true, encoding: .utf8)
        defer { unlink("/etc/pam.d/\(common)") }
        let asUser = try pamDaemon(stack: "@include \(common)\naccount required pam_unix.so\n")
        let enclave = asUser.enclave
        let wrong = try asUser(["keychain", "list", "--stdin"], input: "not-my-password\n")
        XCTAssertNotEqual(wrong.status, 0, "a wrong password passed as the passcode: \(wrong.stdout)")
        XCTAssertTrue(wrong.stderr.contains("pam_rootok") && wrong.stderr.contains("password-only"), wrong.stderr)
        XCTAssertTrue(
            try asUser(["status", "--json"]).stdout.contains("\"passcodeFailures\" : 0"),
            "a refused stack counts nothing"
        )
        XCTAssertTrue(enclave.log().contains("pam_rootok"), "the daemon says so at start")
    }

    private var cleanups: [() -> Void] = []

    override func tearDown() {
        for cleanup in cleanups.reversed() { cleanup() }
        cleanups = []
    }

    /// A system daemon whose passcode for a throw-away user (with a password) is checked through a
    /// PAM service of its own with `stack`; and a way to run lactl as that user.
    private func pamDaemon(stack: String) throws -> PAMUser {
        let security = ["/usr/lib/x86_64-linux-gnu/security", "/lib/x86_64-linux-gnu/security"]
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/useradd"),
            FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser"),
            ["pam_unix.so", "pam_rootok.so"].allSatisfy({ module in
                security.contains { FileManager.default.fileExists(atPath: "\($0)/\(module)") }
            })
        else { throw XCTSkip("needs root, useradd, runuser, pam_unix and pam_rootok") }
        let suffix = String(UInt32.random(in: 100_000...999_999))
        let user = "lapam\(suffix)"
        let service = "laenclaved-test-\(suffix)"
        let password = "Corr3ct-Horse-\(suffix)"
        XCTAssertEqual(try runProcess("/usr/sbin/useradd", ["-M", "-s", "/usr/sbin/nologin", user]).status, 0)
        cleanups.append { _ = try? runProcess("/usr/sbin/userdel", [user]) }
        XCTAssertEqual(try runProcess("/usr/sbin/chpasswd", [], input: "\(user):\(password)\n").status, 0)
        try stack.write(toFile: "/etc/pam.d/\(service)", atomically: true, encoding: .utf8)
        cleanups.append { unlink("/etc/pam.d/\(service)") }
        let enclave = try TestEnclave(
            .with {
                $0.systemMode = true
                $0.passcode = nil
                $0.enrolled = []
                $0.extraArguments = ["--passcode-source", "pam", "--pam-service", service, "--pam-users", user]
            }
        )
        let lactl = enclave.directory + "/lactl"
        try FileManager.default.copyItem(atPath: productPath("lactl"), toPath: lactl)
        chmod(lactl, 0o755)
        return PAMUser(enclave: enclave, user: user, password: password, lactl: lactl)
    }
}

/// A throw-away user whose passcode is checked through PAM, and lactl run as that user.
private struct PAMUser {
    let enclave: TestEnclave
    let user: String
    let password: String
    let lactl: String

    func callAsFunction(_ arguments: [String], input: String = "") throws -> ProcessOutput {
        try runProcess(
            "/usr/sbin/runuser",
            ["-u", user, "--", lactl] + arguments + ["--socket", enclave.socketPath],
            input: input,
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/tmp"]
        )
    }
}
