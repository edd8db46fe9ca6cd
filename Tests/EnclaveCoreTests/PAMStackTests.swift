import EnclaveCore
import XCTest

/// `PAMStack`: which auth modules a service can run, through includes, as Linux-PAM reads it.
final class PAMStackTests: XCTestCase {
    /// Debian's common-auth once libpam-fprintd is installed (pam-auth-update's own layout).
    private let debianCommonAuthWithFprintd = """
        # here are the per-package modules (the "Primary" block)
        auth\t[success=2 default=ignore]\tpam_fprintd.so max-tries=1 timeout=10 # debug
        auth\t[success=1 default=ignore]\tpam_unix.so nullok try_first_pass
        # here's the fallback if no module succeeds
        auth\trequisite\t\t\tpam_deny.so
        auth\trequired\t\t\tpam_permit.so
        """

    func testWhatEachServiceCanAccept() {
        let files: [String: String] = [
            "common-auth": debianCommonAuthWithFprintd,
            "common-account": "account [success=1 new_authtok_reqd=done default=ignore] pam_unix.so\n",
            "login-like": "@include common-auth\n@include common-account\n",
            "laenclaved": "auth required pam_unix.so nodelay\naccount required pam_unix.so\n",
            "substacked": "auth substack common-auth\n",
            "included": "auth include laenclaved\n",
            "optional-token":
                "-auth sufficient /usr/lib/x86_64-linux-gnu/security/pam_u2f.so cue\nauth required pam_unix.so\n",
            "continued": "auth [success=done \\\n default=ignore] pam_yubico.so id=1\nauth required pam_unix.so\n",
            "looping": "@include looping\nauth required pam_unix.so\n",
            "commented": "# auth sufficient pam_fprintd.so\nauth required pam_unix.so # pam_u2f.so\n",
            "missing-include": "@include nowhere\nauth required pam_unix.so\n",
            // pam-auth-update with our own module enabled: the daemon asking itself would recurse.
            "common-auth-laenclave":
                "auth [success=2 default=ignore] pam_laenclave.so\nauth [success=1 default=ignore] pam_unix.so nullok\n",
            "login-with-laenclave": "@include common-auth-laenclave\n",
        ]
        let table: [(service: String, modules: [String], other: [String], missing: [String])] = [
            ("login-like", ["pam_fprintd", "pam_unix", "pam_deny", "pam_permit"], ["pam_fprintd"], []),
            ("laenclaved", ["pam_unix"], [], []),
            ("substacked", ["pam_fprintd", "pam_unix", "pam_deny", "pam_permit"], ["pam_fprintd"], []),
            ("included", ["pam_unix"], [], []),
            ("optional-token", ["pam_u2f", "pam_unix"], ["pam_u2f"], []),
            ("continued", ["pam_yubico", "pam_unix"], ["pam_yubico"], []),
            ("looping", ["pam_unix"], [], []),
            ("commented", ["pam_unix"], [], []),
            ("missing-include", ["pam_unix"], [], ["nowhere"]),
            ("absent", [], [], ["absent"]),
            ("login-with-laenclave", ["pam_laenclave", "pam_unix"], ["pam_laenclave"], []),
        ]
        for row in table {
            let stack = PAMStack.read(service: row.service) { files[$0] }
            XCTAssertEqual(stack.authModules, row.modules, row.service)
            XCTAssertEqual(stack.otherFactors, row.other, row.service)
            XCTAssertEqual(stack.missing, row.missing, row.service)
        }
    }

    /// Where the PAM module is enabled, as `lactl doctor` says it: through includes, not in a
    /// comment, not in another type's line; and the profile the package ships, once
    /// pam-auth-update has put it in common-auth, reaches sudo.
    func testWhichServicesUseTheModule() throws {
        let profile = try String(
            contentsOfFile: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().path + "/packaging/laenclave.pam-config",
            encoding: .utf8
        )
        let line = try XCTUnwrap(profile.split(separator: "\n").first { $0.contains("pam_laenclave.so") })
        let files: [String: String] = [
            "common-auth":
                "auth \(line.trimmingCharacters(in: .whitespaces))\nauth [success=1 default=ignore] pam_unix.so\n",
            "sudo": "@include common-auth\naccount include common-account\n",
            "su": "auth sufficient pam_rootok.so\n@include common-auth\n",
            "sshd-commented": "# @include common-auth\nauth required pam_unix.so\n",
            "session-only": "session optional pam_laenclave.so\n",
            "direct": "auth sufficient /usr/lib/x86_64-linux-gnu/security/pam_laenclave.so password=none\n",
        ]
        XCTAssertEqual(
            PAMStack.services(using: "pam_laenclave", among: Array(files.keys)) { files[$0] },
            ["common-auth", "direct", "su", "sudo"]
        )
        XCTAssertTrue(line.contains("maxtries=die"), "a durable lockout is not routed around: \(line)")
        XCTAssertTrue(profile.contains("Default: no"), "installing the package enables nothing")
    }

    /// The stack the package ships is password-only.
    func testTheShippedServiceIsPasswordOnly() throws {
        let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../packaging/laenclaved.pam"
        ).standardized
        let text = try String(contentsOf: shipped, encoding: .utf8)
        let stack = PAMStack.read(service: "laenclaved") { $0 == "laenclaved" ? text : nil }
        XCTAssertEqual(stack.authModules, ["pam_unix"])
        XCTAssertEqual(stack.otherFactors, [])
    }
}
