import EnclaveClient
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The module under the machine's own callers whose PAM service names are fixed — `pkexec`
/// (`polkit-1`) and `su` — each run as a person runs it, on their terminal. All of it in a mount
/// namespace of the test's own, where `/etc/pam.d`, the system bus and polkit's rules are the
/// test's: the machine's files are never touched.
final class PAMModuleSystemCallersTests: XCTestCase {
    private var bench: PAMModuleBench?
    private var space: PAMNamespace?

    override func tearDown() {
        space?.stop()
        space = nil
        bench?.stop()
        bench = nil
    }

    /// pkexec as polkit 122 (Debian 12's) runs it on the user's terminal: the user's agent
    /// (`pkttyagent`, as `systemctl` starts it) starts the setuid `polkit-agent-helper-1`, whose
    /// PAM service `polkit-1` loads the module; the daemon's prompt names polkit's service, a
    /// touch passes and so does the login password typed while the sensor is armed, and the real
    /// polkitd lets pkexec run the command as root. The audit log has each, asked by root (the
    /// helper) for the user.
    func testPkexecWithAFingerOrThePasswordAtOnce() throws {
        guard TmuxTerminal.available, PAMNamespace.available, PAMNamespace.polkitAvailable else {
            throw XCTSkip("needs tmux, pkexec, pkttyagent, polkitd, dbus-daemon and unshare (scripts/setup-debian)")
        }
        let b = try PAMModuleBench()
        bench = b
        let space = try PAMNamespace(
            directory: b.logind + "/namespace",
            services: ["polkit-1": try b.stackAbovePamUnix(options: "")],
            polkitAuthenticatingAsSelf: b.user
        )
        self.space = space

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

    /// The one command a person runs, `pam-auth-update --enable laenclave`, with the shipped
    /// profile (its module line pointing at the test's module and daemon), on a copy of the
    /// machine's PAM: the module goes into common-auth above pam_unix, and the machine's own
    /// `sudo` service (which includes common-auth) then takes a touch. And no recursion: the
    /// daemon's own login-password service including that common-auth is refused, not waited on —
    /// the typed password ends the prompt unavailable at once, and pam_unix asks next.
    func testOneCommandEnablesItForTheMachinesOwnSudo() throws {
        guard TmuxTerminal.available, PAMNamespace.available,
            FileManager.default.isExecutableFile(atPath: "/usr/sbin/pam-auth-update"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/sudo")
        else { throw XCTSkip("needs tmux, pam-auth-update, sudo and unshare") }
        let b = try PAMModuleBench()
        bench = b
        let shipped = try String(
            contentsOfFile: PAMModuleBench.repository + "/packaging/laenclave.pam-config",
            encoding: .utf8
        )
        let profile = shipped.replacingOccurrences(
            of: "pam_laenclave.so",
            with: "\(try PAMModuleBench.module()) socket=\(b.enclave.socketPath)"
        )
        // What pam-auth-update writes on the machine it runs on, to see them untouched after.
        let machineFiles = ["/etc/pam.d/common-auth", "/var/lib/pam/seen", "/var/cache/debconf/config.dat"].map {
            ($0, FileManager.default.contents(atPath: $0))
        }
        let space = try PAMNamespace(
            directory: b.logind + "/namespace",
            services: [:],
            polkitAuthenticatingAsSelf: nil,
            copyingTheMachinesPAMWith: ["laenclave": profile]
        )
        self.space = space
        let enable = try space.run(
            ["/usr/sbin/pam-auth-update", "--enable", "laenclave"],
            environment: ["DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"]
        )
        XCTAssertEqual(enable.status, 0, enable.stdout + enable.stderr)
        let commonAuth = space.pamFile("common-auth")
        let lines = commonAuth.split(separator: "\n").filter { $0.hasPrefix("auth") }
        let module = try XCTUnwrap(lines.firstIndex { $0.contains("pam_laenclave.so") }, commonAuth)
        let unix = try XCTUnwrap(lines.firstIndex { $0.contains("pam_unix.so") }, commonAuth)
        XCTAssertLessThan(module, unix, "above pam_unix: \(commonAuth)")
        XCTAssertTrue(lines[module].contains("maxtries=die"), commonAuth)
        XCTAssertTrue(space.pamFile("sudo").contains("@include common-auth"), "the machine's own sudo service")
        for (path, before) in machineFiles {
            XCTAssertEqual(FileManager.default.contents(atPath: path), before, "the machine's \(path) is untouched")
        }

        try b.sudoers(pamService: nil)
        let touched = try b.asUserOnTerminal("sudo true", inNamespaceOf: space.bus)
        touched.terminal.waitFor("sudo asks to authenticate \(b.user)")
        try touched.terminal.press("C-t")
        XCTAssertEqual(touched.exitStatus(), 0, touched.errors + touched.terminal.screen())
        let entry = try XCTUnwrap(try b.pamAudit(count: 1).first)
        XCTAssertTrue(entry.result.hasPrefix("success (success(biometric))"), entry.result)
        XCTAssertTrue(entry.app.contains(" service=sudo "), entry.app)

        // The daemon's login-password service with that common-auth in it (as `login` has).
        let common = "laenclave-common-\(b.suffix)"
        try commonAuth.write(toFile: "/etc/pam.d/\(common)", atomically: true, encoding: .utf8)
        defer { unlink("/etc/pam.d/\(common)") }
        try b.rewriteLoginService("@include \(common)\naccount required pam_unix.so\n")
        let typed = try b.asUserOnTerminal("sudo true", inNamespaceOf: space.bus)
        typed.terminal.waitFor("or type your password")
        try typed.terminal.type(b.password)
        try typed.terminal.press("Enter")
        typed.terminal.waitFor("password for \(b.user)")
        try typed.terminal.type(b.password)
        try typed.terminal.press("Enter")
        XCTAssertEqual(typed.exitStatus(), 0, typed.errors + typed.terminal.screen())
        let audit = try b.pamAudit(count: 2)
        XCTAssertEqual(audit.count, 2, "one request, never one from inside the daemon's own check: \(audit)")
        XCTAssertTrue(audit.first?.result.hasPrefix("unavailable") == true, "\(audit)")
    }

    /// Real `su` (setuid, service `su`) on the user's terminal. `su` to oneself from one's own
    /// session at the seat: a touch passes. `su` to another user from it: the finger at this
    /// seat is not theirs to give, so the module steps aside and pam_unix asks the other user's
    /// password at once.
    func testSuWithAFingerForOneselfAndThePasswordForAnother() throws {
        guard TmuxTerminal.available, PAMNamespace.available,
            FileManager.default.isExecutableFile(atPath: "/usr/bin/su")
        else { throw XCTSkip("needs tmux, su and unshare") }
        let b = try PAMModuleBench()
        bench = b
        let other = try b.otherUser()
        let otherPassword = "Pw-" + UUID().uuidString
        XCTAssertEqual(try runProcess("/usr/sbin/chpasswd", [], input: "\(other.name):\(otherPassword)\n").status, 0)
        let space = try PAMNamespace(
            directory: b.logind + "/namespace",
            services: ["su": try b.stackAbovePamUnix(options: "")],
            polkitAuthenticatingAsSelf: nil
        )
        self.space = space

        let oneself = try b.asUserOnTerminal("su -c 'id -un' \(b.user)", inNamespaceOf: space.bus)
        oneself.terminal.waitFor("su asks to authenticate \(b.user)")
        try oneself.terminal.press("C-t")
        XCTAssertEqual(oneself.exitStatus(), 0, oneself.errors + oneself.terminal.screen())
        XCTAssertEqual(oneself.output.trimmingCharacters(in: .whitespacesAndNewlines), b.user)
        let entry = try XCTUnwrap(try b.pamAudit(count: 1).first)
        XCTAssertTrue(entry.result.hasPrefix("success (success(biometric))"), entry.result)
        XCTAssertTrue(
            entry.app.hasPrefix("peer=0 session=\(b.session) service=su user=\(b.user) tty=/dev/pts/"),
            entry.app
        )

        let another = try b.asUserOnTerminal("su -c 'id -un' \(other.name)", inNamespaceOf: space.bus)
        // su's own prompt (pam_unix's, through su's conversation) goes to its standard error.
        let deadline = Date().addingTimeInterval(20)
        while !another.errors.contains("Password:"), Date() < deadline { usleep(50_000) }
        XCTAssertTrue(another.errors.contains("Password:"), another.errors + another.terminal.screen())
        XCTAssertFalse(another.terminal.screen().contains("asks to authenticate"), another.terminal.screen())
        try another.terminal.type(otherPassword)
        try another.terminal.press("Enter")
        XCTAssertEqual(another.exitStatus(), 0, another.errors + another.terminal.screen())
        XCTAssertEqual(another.output.trimmingCharacters(in: .whitespacesAndNewlines), other.name)
    }
}

/// A mount namespace of a test's own whose `/etc/pam.d` holds `services` only and whose `/run`
/// holds only a system bus of its own; with `polkitAuthenticatingAsSelf`, the real polkitd on that
/// bus, its `/etc/polkit-1/rules.d` holding one rule: that user may run pkexec on authenticating
/// as themselves (`AUTH_SELF`). The namespace lives as long as its first process, the bus.
final class PAMNamespace {
    static var available: Bool {
        ["/usr/bin/dbus-daemon", "/usr/bin/unshare", "/usr/bin/nsenter"].allSatisfy {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }
    static var polkitAvailable: Bool {
        ["/usr/bin/pkexec", "/usr/bin/pkttyagent", "/usr/lib/polkit-1/polkitd"].allSatisfy {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    /// The bus's pid: its mount namespace is the test's.
    let bus: pid_t
    private var busRunning = true
    private var polkitd: pid_t?
    private let directory: String

    /// `profiles`: when given, the namespace's PAM is a copy of the machine's — `/etc/pam.d`,
    /// pam-auth-update's profiles (`/usr/share/pam-configs`, with `profiles` added), its state
    /// (`/var/lib/pam`) and debconf's database, where it keeps its choices (`/var/cache/debconf`)
    /// — for pam-auth-update to change there.
    init(
        directory: String,
        services: [String: String],
        polkitAuthenticatingAsSelf user: String?,
        copyingTheMachinesPAMWith profiles: [String: String]? = nil
    ) throws {
        self.directory = directory
        for sub in ["", "/pam.d", "/rules.d", "/pam-configs", "/pam-state", "/debconf"] {
            try FileManager.default.createDirectory(atPath: directory + sub, withIntermediateDirectories: true)
            chmod(directory + sub, 0o755)
        }
        if let profiles {
            for (from, to) in [
                ("/etc/pam.d", "/pam.d"), ("/usr/share/pam-configs", "/pam-configs"), ("/var/lib/pam", "/pam-state"),
                ("/var/cache/debconf", "/debconf"),
            ] {
                let copy = try runProcess("/bin/cp", ["-a", from + "/.", directory + to])
                guard copy.status == 0 else { throw PAMModuleBench.BenchError("copying \(from): \(copy.stderr)") }
            }
            for (name, text) in profiles {
                try text.write(toFile: directory + "/pam-configs/" + name, atomically: true, encoding: .utf8)
            }
        }
        for (name, stack) in services {
            try stack.write(toFile: directory + "/pam.d/" + name, atomically: true, encoding: .utf8)
        }
        if let user {
            // polkitd reads its rules as its own user.
            let rule = directory + "/rules.d/00-laenclave-test.rules"
            try """
            polkit.addRule(function(action, subject) {
                if (action.id == "org.freedesktop.policykit.exec" && subject.user == "\(user)") { return polkit.Result.AUTH_SELF; }
            });
            """.write(toFile: rule, atomically: true, encoding: .utf8)
            chmod(rule, 0o644)
        }
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
        var setup = [
            "mount -t tmpfs -o mode=0755 tmpfs /run", "mkdir /run/dbus",
            "mount --bind '\(directory)/pam.d' /etc/pam.d",
        ]
        if user != nil { setup.append("mount --bind '\(directory)/rules.d' /etc/polkit-1/rules.d") }
        if profiles != nil {
            setup.append("mount --bind '\(directory)/pam-configs' /usr/share/pam-configs")
            setup.append("mount --bind '\(directory)/pam-state' /var/lib/pam")
            setup.append("mount --bind '\(directory)/debconf' /var/cache/debconf")
        }
        setup.append("exec /usr/bin/dbus-daemon --config-file='\(directory)/bus.conf' --nofork --nopidfile")
        bus = try DaemonLauncher.spawn(
            "/usr/bin/unshare",
            ["--mount", "--propagation", "private", "/bin/sh", "-c", setup.joined(separator: " && ")]
        )
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
        guard user != nil else { return }
        let enter = "--mount=/proc/\(bus)/ns/mnt"
        polkitd = try DaemonLauncher.spawn(
            "/bin/sh",
            ["-c", "exec /usr/bin/nsenter \(enter) /usr/lib/polkit-1/polkitd > '\(directory)/polkitd.log' 2>&1"]
        )
        let up = try runProcess(
            "/usr/bin/nsenter",
            [enter, "/usr/bin/gdbus", "wait", "--system", "--timeout", "10", "org.freedesktop.PolicyKit1"],
            timeout: 20
        )
        guard up.status == 0 else {
            stop()
            throw PAMModuleBench.BenchError("polkitd did not start: \(up.stderr)")
        }
    }

    deinit { stop() }

    /// `arguments` run as root in the namespace.
    func run(_ arguments: [String], environment: [String: String]? = nil) throws -> ProcessOutput {
        try runProcess("/usr/bin/nsenter", ["--mount=/proc/\(bus)/ns/mnt"] + arguments, environment: environment)
    }

    /// A file of the namespace's `/etc/pam.d`.
    func pamFile(_ name: String) -> String {
        (try? String(contentsOfFile: directory + "/pam.d/" + name, encoding: .utf8)) ?? ""
    }

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
