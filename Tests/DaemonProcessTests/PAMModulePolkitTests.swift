import EnclaveClient
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `pkexec` end to end as polkit 122 (Debian 12's) runs it: the user's authentication agent
/// (`pkttyagent`, as `systemctl` starts it on a terminal) starts the setuid
/// `polkit-agent-helper-1`, whose PAM service `polkit-1` loads the module; the real polkitd
/// decides and pkexec runs the command as root. All of it in a mount namespace of the test's own,
/// where the system bus, `/etc/pam.d` and polkit's rules are the test's: the machine's files are
/// never touched.
final class PAMModulePolkitTests: XCTestCase {
    private var bench: PAMModuleBench?
    private var polkit: PolkitInNamespace?

    override func tearDown() {
        polkit?.stop()
        polkit = nil
        bench?.stop()
        bench = nil
    }

    /// pkexec on the user's terminal: the daemon's prompt names polkit's service, a touch passes
    /// and so does the login password typed while the sensor is armed, and the command runs as
    /// root. The audit log has each, asked by root (the helper) for the user.
    func testPkexecWithAFingerOrThePasswordAtOnce() throws {
        guard TmuxTerminal.available, PolkitInNamespace.available else {
            throw XCTSkip("needs tmux, pkexec, pkttyagent, polkitd, dbus-daemon and unshare (scripts/setup-debian)")
        }
        let b = try PAMModuleBench()
        bench = b
        let space = try PolkitInNamespace(
            directory: b.logind + "/polkit",
            polkitStack: try b.stackAbovePamUnix(options: ""),
            authenticatingAsSelf: b.user
        )
        polkit = space

        let touched = try b.asUserOnTerminal(space.pkexecWithTheUsersAgent("/usr/bin/id -u"), inNamespaceOf: space.bus)
        touched.terminal.waitFor("polkit-1 asks to authenticate \(b.user)")
        touched.terminal.waitFor("or type your password")
        try touched.terminal.press("C-t")
        XCTAssertEqual(touched.exitStatus(), 0, touched.errors + touched.terminal.screen() + space.log)
        XCTAssertEqual(touched.output.trimmingCharacters(in: .whitespacesAndNewlines), "0", "pkexec ran it as root")
        let first = try XCTUnwrap(try b.pamAudit(count: 1).first)
        XCTAssertTrue(first.result.hasPrefix("success (success(biometric))"), first.result)
        XCTAssertTrue(first.app.hasPrefix("peer=0 session=\(b.session) service=polkit-1 user=\(b.user) "), first.app)

        let typed = try b.asUserOnTerminal(space.pkexecWithTheUsersAgent("/usr/bin/id -u"), inNamespaceOf: space.bus)
        typed.terminal.waitFor("or type your password")
        try typed.terminal.type(b.password)
        try typed.terminal.press("Enter")
        XCTAssertEqual(typed.exitStatus(), 0, typed.errors + typed.terminal.screen() + space.log)
        XCTAssertEqual(typed.output.trimmingCharacters(in: .whitespacesAndNewlines), "0")
        XCTAssertTrue(try b.pamAudit(count: 2).first?.result.hasPrefix("success (success(passcode))") == true)
        XCTAssertTrue(space.log.contains("successfully authenticated as unix-user:\(b.user)"), space.log)

        // Cancelled on the daemon's prompt: the next module (pam_unix, through the agent) asks,
        // and a wrong password there is not authorized: nothing runs.
        let cancelled = try b.asUserOnTerminal(
            space.pkexecWithTheUsersAgent("/usr/bin/id -u"),
            inNamespaceOf: space.bus
        )
        cancelled.terminal.waitFor("or type your password")
        try cancelled.terminal.press("Escape")
        cancelled.terminal.waitFor("Password:")
        try cancelled.terminal.type("not-" + b.password)
        try cancelled.terminal.press("Enter")
        let status = cancelled.exitStatus()
        XCTAssertNotNil(status, cancelled.terminal.screen())
        XCTAssertNotEqual(status, 0, cancelled.terminal.screen())
        XCTAssertEqual(cancelled.output, "", "nothing ran")
        XCTAssertTrue(try b.pamAudit(count: 3).first?.result.hasPrefix("cancelled") == true)
    }
}

/// The real polkitd on a system bus of its own, in a mount namespace whose `/run`, `/etc/pam.d`
/// and `/etc/polkit-1/rules.d` are the test's: `polkit-1` is `polkitStack` and one rule lets the
/// user run pkexec on authenticating as themselves (`AUTH_SELF`). The namespace lives as long as
/// its first process, the bus.
final class PolkitInNamespace {
    static var available: Bool {
        [
            "/usr/bin/pkexec", "/usr/bin/pkttyagent", "/usr/lib/polkit-1/polkitd", "/usr/bin/dbus-daemon",
            "/usr/bin/unshare",
        ]
        .allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The bus's pid: its mount namespace is the test's.
    let bus: pid_t
    private var busRunning = true
    private var polkitd: pid_t?
    private let directory: String

    init(directory: String, polkitStack: String, authenticatingAsSelf user: String) throws {
        self.directory = directory
        for sub in ["", "/pam.d", "/rules.d"] {
            try FileManager.default.createDirectory(atPath: directory + sub, withIntermediateDirectories: true)
            chmod(directory + sub, 0o755)
        }
        try polkitStack.write(toFile: directory + "/pam.d/polkit-1", atomically: true, encoding: .utf8)
        // polkitd reads its rules as its own user.
        let rule = directory + "/rules.d/00-laenclave-test.rules"
        try """
        polkit.addRule(function(action, subject) {
            if (action.id == "org.freedesktop.policykit.exec" && subject.user == "\(user)") { return polkit.Result.AUTH_SELF; }
        });
        """.write(toFile: rule, atomically: true, encoding: .utf8)
        chmod(rule, 0o644)
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <listen>unix:path=/run/dbus/system_bus_socket</listen>
          <auth>EXTERNAL</auth>
          <policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/></policy>
        </busconfig>
        """.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        // The namespace's /run is empty but for the bus: what sudo or the machine's own bus keep
        // there is out of reach, and nothing is made in the machine's /run.
        let setup = [
            "mount -t tmpfs -o mode=0755 tmpfs /run", "mkdir /run/dbus",
            "mount --bind '\(directory)/pam.d' /etc/pam.d",
            "mount --bind '\(directory)/rules.d' /etc/polkit-1/rules.d",
            "exec /usr/bin/dbus-daemon --config-file='\(directory)/bus.conf' --nofork --nopidfile",
        ].joined(separator: " && ")
        bus = try DaemonLauncher.spawn(
            "/usr/bin/unshare",
            ["--mount", "--propagation", "private", "/bin/sh", "-c", setup]
        )
        let enter = ["--mount=/proc/\(bus)/ns/mnt"]
        let socket = "/proc/\(bus)/root/run/dbus/system_bus_socket"
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: socket) {
            guard Date() < deadline, kill(bus, 0) == 0 else {
                stop()
                throw PAMModuleBench.BenchError("the namespace's system bus did not start within 10 s")
            }
            usleep(10_000)
        }
        chmod(socket, 0o666)
        polkitd = try DaemonLauncher.spawn(
            "/bin/sh",
            ["-c", "exec /usr/bin/nsenter \(enter[0]) /usr/lib/polkit-1/polkitd > '\(directory)/polkitd.log' 2>&1"]
        )
        let up = try runProcess(
            "/usr/bin/nsenter",
            enter + ["/usr/bin/gdbus", "wait", "--system", "--timeout", "10", "org.freedesktop.PolicyKit1"],
            timeout: 20
        )
        guard up.status == 0 else {
            stop()
            throw PAMModuleBench.BenchError("polkitd did not start: \(up.stderr)")
        }
    }

    deinit { stop() }

    /// What polkitd logged.
    var log: String { (try? String(contentsOfFile: directory + "/polkitd.log", encoding: .utf8)) ?? "" }

    /// A shell command that, as the user on their terminal, starts their own polkit agent for the
    /// shell (`pkttyagent`, once it says it is registered), runs `pkexec command`, and ends with
    /// pkexec's status.
    func pkexecWithTheUsersAgent(_ command: String) -> String {
        let script = [
            "d=$(mktemp -d) && mkfifo \"$d/ready\"", "{ pkttyagent --process $$ --notify-fd 3 3>\"$d/ready\" & }",
            "cat \"$d/ready\"", "pkexec \(command); s=$?; kill $! 2>/dev/null; rm -r \"$d\"; exit $s",
        ]
        return "sh -c '\(script.joined(separator: "; "))'"
    }

    func stop() {
        if let polkitd { terminateAndWait(polkitd) }
        polkitd = nil
        if busRunning { terminateAndWait(bus) }
        busRunning = false
    }
}
