import EnclaveClient
import EnclaveProtocol
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The system install, end to end on this (throw-away) machine: `scripts/build-deb` builds the
/// package, `dpkg -i` installs it (user, directories, units), the daemon is started the way
/// laenclaved.service starts it — as the laenclaved user holding only the unit's capabilities, on a listening
/// socket passed by socket activation — and a second user (`nobody`) sets a passcode and
/// authenticates through it; the polkit rule it ships is judged by the real polkitd; `lactl
/// doctor` diagnoses it; `dpkg -r` and `dpkg -P` clean up.
/// systemd is not PID 1 here, so the test does what the units say by hand. Needs root and dpkg-deb.
final class PackageInstallTests: XCTestCase {
    private static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    private let socketPath = EnclavePaths.systemSocket
    private let daemonPath = "/usr/bin/laenclaved"
    private let lactlPath = "/usr/bin/lactl"
    private var daemons: [pid_t] = []
    private var listener: Int32 = -1
    private var logDirectory = ""
    /// Set once the package test starts changing the system: only then does tearDown purge.
    private var changedTheSystem = false

    override func tearDown() {
        for daemon in daemons { terminateAndWait(daemon) }
        daemons = []
        if listener >= 0 {
            close(listener)
            listener = -1
        }
        // Never leave a system daemon's socket behind: clients would stop using their user daemons.
        if changedTheSystem {
            if installed("laenclaved-agent") {
                _ = try? runProcess("/usr/bin/dpkg", ["-P", "laenclaved-agent"], timeout: 120)
            }
            if installed() { _ = try? runProcess("/usr/bin/dpkg", ["-P", "laenclaved"], timeout: 120) }
            unlink(socketPath)
            rmdir("/run/laenclaved")
        }
        if !logDirectory.isEmpty { try? FileManager.default.removeItem(atPath: logDirectory) }
        super.tearDown()
    }

    func testTheDebianPackageInstallsRunsAsItsOwnUserAndIsRemovedCleanly() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: installs a Debian package on this machine") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dpkg-deb") else { throw XCTSkip("needs dpkg-deb") }
        var template = Array("/tmp/la-package-XXXXXX".utf8CString)
        logDirectory = String(cString: mkdtemp(&template)!)
        chmod(logDirectory, 0o755)

        let deb = try buildPackage()
        // Start from nothing (a previous run, or a package a person installed), then install.
        changedTheSystem = true
        if installed("laenclaved-agent") {
            XCTAssertEqual(try runProcess("/usr/bin/dpkg", ["-P", "laenclaved-agent"], timeout: 120).status, 0)
        }
        if installed() {
            XCTAssertEqual(try runProcess("/usr/bin/dpkg", ["-P", "laenclaved"], timeout: 120).status, 0)
        }
        unlink(socketPath)
        // A PAM service left by `scripts/install` would make dpkg ask about its conffile.
        unlink(Self.pamService)
        let install = try runProcess("/usr/bin/dpkg", ["-i", deb], timeout: 300)
        XCTAssertEqual(install.status, 0, install.stdout + install.stderr)
        try checkInstalledFiles()
        // The module is known to pam-auth-update, and enabled only by the administrator.
        let commonAuth = (try? String(contentsOfFile: "/etc/pam.d/common-auth", encoding: .utf8)) ?? ""
        XCTAssertFalse(commonAuth.contains("pam_laenclave"), "installing enables nothing: \(commonAuth)")
        try polkitLetsOnlyTheDaemonUseTheReader()

        try daemonWithoutCapabilityRefusesOtherUsers()
        try activatedDaemonServesASecondUser()
        try restartedDaemonKeepsStateAndIsHealthy(
            agentPackage: deb.replacingOccurrences(of: "/laenclaved_", with: "/laenclaved-agent_")
        )

        // Remove: the programs and units go, the state and the key stay for a reinstall.
        let remove = try runProcess("/usr/bin/dpkg", ["-r", "laenclaved"], timeout: 120)
        XCTAssertEqual(remove.status, 0, remove.stdout + remove.stderr)
        for path in [
            daemonPath, lactlPath, "/lib/systemd/system/laenclaved.service", "/lib/systemd/system/laenclaved.socket",
            "/usr/lib/sysusers.d/laenclaved.conf", "/usr/lib/tmpfiles.d/laenclaved.conf", Self.polkitRule, socketPath,
            "/run/laenclaved", Self.pamModule, Self.pamProfile,
        ] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "\(path) is left after dpkg -r")
        }
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: "/var/lib/laenclaved/enclave.sqlite"),
            "dpkg -r keeps the state"
        )
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: Self.pamService),
            "dpkg -r keeps the PAM service, a conffile"
        )
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: EnclavePaths.systemMasterKey),
            "dpkg -r keeps the master key"
        )
        // Purge: the state and the key go too.
        let purge = try runProcess("/usr/bin/dpkg", ["-P", "laenclaved"], timeout: 120)
        XCTAssertEqual(purge.status, 0, purge.stdout + purge.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/var/lib/laenclaved"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/etc/laenclaved"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: Self.pamService), "dpkg -P removes the PAM service")
        XCTAssertFalse(installed())
    }

    /// Socket activation on its own (any user, no package): the daemon serves the socket it is
    /// given, leaves the file alone when it stops, ignores variables meant for another process, and
    /// refuses to start on a descriptor that is not a listening socket.
    func testSocketActivationServesThePassedSocketAndNeverRemovesIt() throws {
        var template = Array("/tmp/la-activation-XXXXXX".utf8CString)
        logDirectory = String(cString: mkdtemp(&template)!)
        let root = logDirectory
        mkdir(root + "/run", 0o700)
        let path = root + "/run/socket"
        let arguments = [
            productPath("laenclaved"), "--user", "--socket", path, "--state-dir", root + "/state",
            "--key-file", root + "/keys/master.key", "--passcode-cost", "10",
        ]
        listener = try listeningSocket(at: path, owner: nil, mode: 0o600)
        let inode = try XCTUnwrap(info(path)).st_ino
        let log = root + "/activated.log"
        XCTAssertTrue(FileManager.default.createFile(atPath: log, contents: nil))
        let daemon = try spawnWithSocket(arguments, descriptor: listener, log: log)
        daemons.append(daemon)
        // While this process holds the listening socket a connection never fails, it waits in the
        // backlog: connect only to a daemon that said it serves, so a crash cannot hang the test.
        try waitUntilListening(daemon, log: log)
        let connection = try EnclaveConnection(socketPath: path)
        XCTAssertEqual(connection.hello.mode, .user)
        connection.close()
        XCTAssertTrue(daemonLog(log).contains("activation=systemd"), daemonLog(log))
        terminateAndWait(daemon)
        daemons.removeAll { $0 == daemon }
        XCTAssertEqual(
            info(path)?.st_ino,
            inode,
            "an activated daemon must not remove or re-create the socket: \(daemonLog(log))"
        )
        XCTAssertTrue(daemonLog(log).contains("stopped"), daemonLog(log))

        // Variables for another pid are not ours: the daemon binds the socket itself (a new file).
        let own = try spawnWithSocket(arguments, descriptor: listener, log: log, listenPID: "1")
        daemons.append(own)
        eventually("the daemon's own socket") { info(path).map { $0.st_ino != inode } ?? false }
        XCTAssertNoThrow(try EnclaveConnection(socketPath: path).close())
        terminateAndWait(own)
        daemons.removeAll { $0 == own }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "a daemon that bound the socket removes it")

        // Descriptor 3 is not a listening socket: refuse, never bind another.
        let file = open(log, O_RDONLY | O_CLOEXEC)
        defer { close(file) }
        let bad = try spawnWithSocket(arguments, descriptor: file, log: log)
        daemons.append(bad)
        var status: Int32 = 0
        var reaped = false
        eventually("the daemon to give up", timeout: 20) {
            reaped = waitpid(bad, &status, WNOHANG) == bad
            return reaped
        }
        if reaped { daemons.removeAll { $0 == bad } }
        XCTAssertNotEqual(status, 0, "exit status")
        XCTAssertTrue(daemonLog(log).contains("is not a listening Unix stream socket"), daemonLog(log))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
    }

    // MARK: steps

    /// scripts/build-deb: a release build (minutes). Progress lines keep the test watchdog from
    /// taking the silence for a hang.
    private func buildPackage() throws -> String {
        let started = Date()
        let heartbeat = DispatchSource.makeTimerSource(queue: .global())
        heartbeat.schedule(deadline: .now() + 30, repeating: 30)
        heartbeat.setEventHandler {
            FileHandle.standardError.write(
                Data(
                    "PackageInstallTests: scripts/build-deb running for \(Int(Date().timeIntervalSince(started))) s\n"
                        .utf8
                )
            )
        }
        heartbeat.resume()
        defer { heartbeat.cancel() }
        let build = try runProcess("/bin/bash", [Self.repository + "/scripts/build-deb"], timeout: 20 * 60)
        XCTAssertEqual(build.status, 0, build.stdout + build.stderr)
        let directory = Self.repository + "/.build/deb"
        let arch = try runProcess("/usr/bin/dpkg", ["--print-architecture"]).stdout.trimmingCharacters(
            in: .whitespacesAndNewlines
        )
        let debs = try FileManager.default.contentsOfDirectory(atPath: directory).filter {
            $0.hasPrefix("laenclaved_") && $0.hasSuffix("_\(arch).deb")
        }
        let newest = try debs.max { a, b in
            try modified(directory + "/" + a) < modified(directory + "/" + b)
        }
        let deb = try XCTUnwrap(
            newest.map { directory + "/" + $0 },
            "build-deb made no package: \(build.stdout)\(build.stderr)"
        )
        print("PackageInstallTests: built \(deb) in \(Int(Date().timeIntervalSince(started))) s")
        return deb
    }

    private func checkInstalledFiles() throws {
        for (path, mode) in [
            (daemonPath, 0o755), (lactlPath, 0o755),
            ("/lib/systemd/system/laenclaved.socket", 0o644), ("/lib/systemd/system/laenclaved.service", 0o644),
            ("/usr/lib/sysusers.d/laenclaved.conf", 0o644), ("/usr/lib/tmpfiles.d/laenclaved.conf", 0o644),
            ("/usr/share/doc/laenclaved/README.md", 0o644), (Self.polkitRule, 0o644), (Self.pamService, 0o644),
            (Self.pamModule, 0o644), (Self.pamProfile, 0o644),
        ] {
            let st = try XCTUnwrap(info(path), "\(path) is not installed")
            XCTAssertEqual(st.st_mode & 0o7777, mode_t(mode), path)
            XCTAssertEqual(st.st_uid, 0, path)
        }
        // The postinst made the user and its directories.
        let pw = try XCTUnwrap(getpwnam("laenclaved"), "the laenclaved user was not created")
        let uid = pw.pointee.pw_uid
        let gid = pw.pointee.pw_gid
        XCTAssertNotEqual(uid, 0)
        XCTAssertEqual(String(cString: pw.pointee.pw_dir), "/var/lib/laenclaved")
        XCTAssertTrue(String(cString: pw.pointee.pw_shell).hasSuffix("nologin"), "no login shell")
        // The machine's TPM is the system daemon's root by default: its user may open /dev/tpmrm0.
        let groups = try runProcess("/usr/bin/id", ["-nG", "laenclaved"])
        XCTAssertTrue(
            groups.stdout.split(separator: " ").contains {
                $0.trimmingCharacters(in: .whitespacesAndNewlines) == "tss"
            },
            groups.stdout
        )
        for (path, mode) in [("/run/laenclaved", 0o755), ("/var/lib/laenclaved", 0o700), ("/etc/laenclaved", 0o700)] {
            let st = try XCTUnwrap(info(path), "\(path) was not created")
            XCTAssertEqual(st.st_mode & 0o7777, mode_t(mode), path)
            XCTAssertEqual(st.st_uid, uid, path)
            XCTAssertEqual(st.st_gid, gid, path)
        }
        // Statically linked Swift: nothing of the toolchain is needed where the package goes.
        let ldd = try runProcess("/usr/bin/ldd", [daemonPath])
        XCTAssertFalse(ldd.stdout.contains("libswift") || ldd.stdout.contains("libFoundation"), ldd.stdout)
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") {
            let verify = try runProcess(
                "/usr/bin/systemd-analyze",
                [
                    "verify", "--man=no", "/lib/systemd/system/laenclaved.socket",
                    "/lib/systemd/system/laenclaved.service",
                ]
            )
            XCTAssertEqual(verify.status, 0, "the units do not verify: \(verify.stdout)\(verify.stderr)")
        }
    }

    static let polkitRule = "/usr/share/polkit-1/rules.d/50-laenclaved.rules"
    static let pamService = "/etc/pam.d/laenclaved"
    /// Where Linux-PAM loads modules from on this architecture, and the pam-auth-update profile.
    static let pamModule = "/usr/lib/\(multiarch)/security/pam_laenclave.so"
    static let pamProfile = "/usr/share/pam-configs/laenclave"
    private static let multiarch: String = {
        (try? runProcess("/usr/bin/dpkg-architecture", ["-qDEB_HOST_MULTIARCH"]).stdout)?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "x86_64-linux-gnu"
    }()

    /// The packaged polkit rule as the real polkitd judges it (on a private bus standing in for the
    /// system bus): fprintd's verify, enroll and setusername for the laenclaved user, for nobody
    /// else, and nothing more for laenclaved. And enrolment is laenclaved's alone: fprintd lets a
    /// person at the machine enrol and delete fingers with their own password (an active
    /// session's `auth_self_keep`), skipping the device passcode. pkcheck has no logind session
    /// here, so a later rule stands in for that grant, to nobody: before, nobody then enrolled;
    /// the packaged rule, judged first, refuses it, and leaves verify (finger login) to fprintd's
    /// policy.
    private func polkitLetsOnlyTheDaemonUseTheReader() throws {
        let polkitd = "/usr/lib/polkit-1/polkitd"
        let pkcheck = "/usr/bin/pkcheck"
        guard FileManager.default.isExecutableFile(atPath: polkitd),
            FileManager.default.isExecutableFile(atPath: pkcheck),
            FileManager.default.fileExists(atPath: "/usr/share/polkit-1/actions/net.reactivated.fprint.device.policy")
        else {
            return XCTFail(
                "polkitd and fprintd's actions are needed to judge the packaged rule (scripts/setup-debian installs them)"
            )
        }
        let directory = logDirectory + "/polkit"
        mkdir(directory, 0o755)
        let activeSession = "/etc/polkit-1/rules.d/90-la-test-active-session.rules"
        mkdir("/etc/polkit-1/rules.d", 0o755)
        try """
        polkit.addRule(function(action, subject) {
            if (subject.user == "nobody" && action.id.indexOf("net.reactivated.fprint.device.") == 0) { return polkit.Result.YES; }
        });
        """.write(toFile: activeSession, atomically: true, encoding: .utf8)
        defer { unlink(activeSession) }
        let bus = try PrivateSystemBus(directory: directory)
        daemons.append(bus.pid)
        let environment = bus.environment
        daemons.append(try DaemonLauncher.spawn(polkitd, [], environment: environment))
        let up = try runProcess(
            "/usr/bin/gdbus",
            ["wait", "--system", "--timeout", "10", "org.freedesktop.PolicyKit1"],
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            timeout: 20
        )
        XCTAssertEqual(up.status, 0, "polkitd did not start: \(up.stderr)")

        func allowed(_ user: String, _ action: String) throws -> Bool {
            // pkcheck asks about its own process: the shell's pid, which exec hands to pkcheck.
            let out = try runProcess(
                "/usr/sbin/runuser",
                ["-u", user, "--", "/bin/sh", "-c", "exec \(pkcheck) --action-id \(action) --process $$"],
                environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                timeout: 30
            )
            return out.status == 0
        }
        for action in ["verify", "enroll", "setusername"].map({ "net.reactivated.fprint.device." + $0 }) {
            XCTAssertTrue(try allowed("laenclaved", action), "laenclaved may \(action)")
            XCTAssertFalse(try allowed("daemon", action), "another user may not \(action)")
        }
        XCTAssertFalse(
            try allowed("nobody", "net.reactivated.fprint.device.enroll"),
            "only laenclaved enrols and deletes, even where fprintd's policy would let a user"
        )
        XCTAssertTrue(
            try allowed("nobody", "net.reactivated.fprint.device.verify"),
            "the stand-in grant works: the refusal above is the rule's"
        )
        XCTAssertFalse(
            try allowed("laenclaved", "org.freedesktop.hostname1.set-hostname"),
            "the rule grants nothing else"
        )
    }

    /// As plain `runuser -u laenclaved` starts it, without capabilities, the daemon cannot read
    /// other users' /proc/PID and so refuses them: what the unit's AmbientCapabilities is for.
    /// Binding the socket itself, it also removes the file when it stops.
    private func daemonWithoutCapabilityRefusesOtherUsers() throws {
        let log = try logFile("plain.log")
        let daemon = try DaemonLauncher.spawn(
            "/usr/sbin/runuser",
            [
                "-u", "laenclaved", "--", daemonPath, "--system", "--tpm", "off", "--passcode-cost", "10", "--log-file",
                log,
            ]
        )
        daemons.append(daemon)
        eventually("the daemon's socket", timeout: 20) { FileManager.default.fileExists(atPath: socketPath) }
        let st = try XCTUnwrap(info(socketPath))
        XCTAssertEqual(st.st_mode & 0o777, 0o666)
        let refused = try asNobody([lactlPath, "status"])
        XCTAssertEqual(refused.status, 69, refused.stdout + refused.stderr)
        let doctor = try asNobody([lactlPath, "doctor"])
        XCTAssertEqual(doctor.status, 1, doctor.stdout)
        XCTAssertTrue(doctor.stdout.contains("could not identify this client"), doctor.stdout)
        XCTAssertTrue(doctor.stdout.contains("CAP_SYS_PTRACE"), doctor.stdout)
        terminateAndWait(daemon)
        daemons.removeAll { $0 == daemon }
        XCTAssertFalse(FileManager.default.fileExists(atPath: socketPath), "a daemon that bound the socket removes it")
    }

    /// Socket activation with simulation on (what a test machine may do): nobody's passcode and an
    /// authentication with a scripted passcode, through the installed lactl and the system socket.
    private func activatedDaemonServesASecondUser() throws {
        listener = try listeningSocket()
        let inode = try XCTUnwrap(info(socketPath)).st_ino
        let log = try logFile("activated.log")
        // Provisioned through a pipe by its starter (the test), as root would set administration-pipe = yes.
        let daemon = try spawnActivated(
            [
                "--system", "--tpm", "off", "--passcode-cost", "10", "--simulated-sensor", "touchid",
                "--allow-simulation",
                "--administration-pipe",
            ],
            log: log
        )
        daemons.append(daemon)
        try waitUntilListening(daemon, log: log)
        try theParsingProcessHoldsNoCapability(daemon, log: log)

        // No --socket: the client finds the system socket itself.
        let status = try asNobody([lactlPath, "status"])
        XCTAssertEqual(status.status, 0, status.stderr + daemonLog(log))
        XCTAssertTrue(status.stdout.contains("uid 65534, system-mode daemon"), status.stdout)
        XCTAssertTrue(status.stdout.contains("⚠ SIMULATED"), "simulation must be loud: \(status.stdout)")
        XCTAssertTrue(status.stdout.contains("simulation    enabled"), status.stdout)
        XCTAssertTrue(daemonLog(log).contains("activation=systemd"), daemonLog(log))
        XCTAssertTrue(daemonLog(log).contains("SIMULATED SENSOR ENABLED IN SYSTEM MODE"), daemonLog(log))

        let set = try asNobody([lactlPath, "passcode", "set", "--stdin"], input: "246810\n")
        XCTAssertEqual(set.status, 0, set.stdout + set.stderr)
        XCTAssertEqual(try asNobody([lactlPath, "simulate", "passcode=246810"]).status, 0)
        let auth = try asNobody([
            lactlPath, "authenticate", "--policy", "deviceOwnerAuthentication", "--reason", "Package test",
        ])
        XCTAssertEqual(auth.status, 0, auth.stdout + auth.stderr)
        XCTAssertTrue(auth.stdout.contains("authenticated"), auth.stdout)
        try thePersonsTerminalAdministersThroughTheHelper(passcode: "246810", log: log)
        // A wrong passcode counts (the person then gives up): the daemon's counter, not the client's.
        XCTAssertEqual(try asNobody([lactlPath, "simulate", "passcode=1111", "cancel"]).status, 0)
        let wrong = try asNobody([lactlPath, "authenticate", "--policy", "owner", "--reason", "Package test"])
        XCTAssertEqual(wrong.status, 12, "userCancel after the wrong passcode: \(wrong.stdout)\(wrong.stderr)")

        // The doctor, as the second user and as root (who also sees the state and the key).
        let nobodyDoctor = try asNobody([lactlPath, "doctor"])
        XCTAssertEqual(nobodyDoctor.status, 1, "a simulated sensor in system mode is a problem: \(nobodyDoctor.stdout)")
        for check in ["socket", "daemon", "user", "permissions"] {
            XCTAssertTrue(has(nobodyDoctor.stdout, "ok", check), "\(check): \(nobodyDoctor.stdout)")
        }
        XCTAssertTrue(has(nobodyDoctor.stdout, "problem", "sensor"), nobodyDoctor.stdout)
        XCTAssertTrue(has(nobodyDoctor.stdout, "note", "state"), "nobody cannot see the state: \(nobodyDoctor.stdout)")
        XCTAssertTrue(nobodyDoctor.stdout.contains("runs as laenclaved"), nobodyDoctor.stdout)
        let rootDoctor = try runProcess(lactlPath, ["doctor"])
        for check in ["socket", "daemon", "user", "permissions", "state", "master key"] {
            XCTAssertTrue(has(rootDoctor.stdout, "ok", check), "\(check): \(rootDoctor.stdout)")
        }

        terminateAndWait(daemon)
        daemons.removeAll { $0 == daemon }
        // Activated, the daemon leaves the socket to whoever made it (systemd keeps listening on it).
        XCTAssertEqual(info(socketPath)?.st_ino, inode, "an activated daemon must not remove or re-create the socket")
    }

    /// Administration on the person's own terminal, beside a system daemon (issue 33). The daemon,
    /// which lent its capabilities to its helper, cannot read nobody's processes; the helper names
    /// who holds the other side of nobody's tmux pane — tmux, trusted — so the passcode is asked
    /// there and the listing runs, while an app's own pseudo-terminal (script(1)) is refused by the
    /// name of its holder. Before the helper read the holders, both were refused unseen.
    private func thePersonsTerminalAdministersThroughTheHelper(passcode: String, log: String) throws {
        let nobody = try XCTUnwrap(getpwnam("nobody")).pointee
        let directory = logDirectory + "/nobody-terminal"
        XCTAssertEqual(mkdir(directory, 0o700), 0)
        XCTAssertEqual(chown(directory, nobody.pw_uid, nobody.pw_gid), 0)
        let lactl = try TerminalCommand(
            "\(lactlPath) keychain list",
            in: directory,
            user: (nobody.pw_uid, nobody.pw_gid)
        )
        defer { lactl.terminal.stop() }
        lactl.terminal.waitFor("Enter the device passcode to allow it")
        try lactl.terminal.type(passcode)
        try lactl.terminal.press("Enter")
        XCTAssertEqual(lactl.exitStatus(), 0, lactl.errors + lactl.terminal.screen() + daemonLog(log))

        let app = try runProcess(
            "/usr/bin/setpriv",
            [
                "--reuid=\(nobody.pw_uid)", "--regid=\(nobody.pw_gid)", "--clear-groups", "--",
                "/usr/bin/script", "-qefc", "\(lactlPath) keychain list", "/dev/null",
            ],
            input: passcode + "\n",
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/tmp", "SHELL": "/bin/sh"],
            headless: false
        )
        XCTAssertNotEqual(app.status, 0, app.stdout)
        XCTAssertTrue(
            app.stdout.contains("held by /usr/bin/script"),
            "the helper named the app's holder: \(app.stdout) \(app.stderr)"
        )
    }

    /// The unit grants CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH, to read other users' processes; a
    /// process holding CAP_SYS_PTRACE can write any process's memory, root's included. Before, the
    /// daemon that parses every client's JSON held both; now it hands them to its helper, a child
    /// that reads only fixed-size messages from it, and holds none (`PeerHelper`).
    private func theParsingProcessHoldsNoCapability(_ daemon: pid_t, log: String) throws {
        let ptraceAndSearch: UInt64 = 1 << 19 | 1 << 2
        // Every thread: capabilities are per thread.
        let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon)/task")
        XCTAssertGreaterThan(threads.count, 1)
        for thread in threads {
            let status = try String(contentsOfFile: "/proc/\(daemon)/task/\(thread)/status", encoding: .utf8)
            for set in ["CapPrm:", "CapEff:", "CapAmb:"] {
                XCTAssertEqual(
                    try field(set, in: status) & ptraceAndSearch,
                    0,
                    "thread \(thread) of the daemon holds it in \(set) \(daemonLog(log))"
                )
            }
            // What is left in the inheritable and bounding sets no program it runs can take up.
            XCTAssertEqual(try field("NoNewPrivs:", in: status, radix: 10), 1)
        }
        let children = try runProcess("/usr/bin/pgrep", ["-P", String(daemon)]).stdout.split(separator: "\n").compactMap
        { pid_t($0) }
        XCTAssertEqual(children.count, 1, "one helper")
        for child in children {
            let status = try String(contentsOfFile: "/proc/\(child)/status", encoding: .utf8)
            XCTAssertEqual(try field("CapEff:", in: status) & ptraceAndSearch, ptraceAndSearch, "the helper keeps both")
            let command = try String(contentsOfFile: "/proc/\(child)/cmdline", encoding: .utf8)
            XCTAssertTrue(command.contains("--peer-helper"), command)
            // Not the daemon's listening socket: the helper answers the daemon alone.
            var st = stat()
            XCTAssertEqual(fstat(listener, &st), 0)
            let held = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child)/fd").compactMap {
                try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(child)/fd/\($0)")
            }
            XCTAssertFalse(held.contains("socket:[\(st.st_ino)]"), "the helper holds the listening socket: \(held)")
        }
        XCTAssertTrue(daemonLog(log).contains("capabilities=none"), daemonLog(log))
    }

    private func field(_ name: String, in status: String, radix: Int = 16) throws -> UInt64 {
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix(name) })
        return try XCTUnwrap(UInt64(line.dropFirst(name.count).trimmingCharacters(in: .whitespaces), radix: radix))
    }

    /// As systemd restarts the service on the same socket, without simulation: the state survived,
    /// scripted input is refused, and the doctor finds no problem.
    private func restartedDaemonKeepsStateAndIsHealthy(agentPackage: String) throws {
        let log = try logFile("restarted.log")
        let daemon = try spawnActivated(["--system", "--tpm", "off", "--passcode-cost", "10"], log: log)
        daemons.append(daemon)
        try waitUntilListening(daemon, log: log)
        let status = try asNobody([lactlPath, "status", "--json"])
        XCTAssertEqual(status.status, 0, status.stderr + daemonLog(log))
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(json["passcodeSet"] as? Bool, true, "nobody's passcode survives the restart")
        XCTAssertEqual(json["passcodeFailures"] as? Int, 1, "and so does the failure")
        let simulate = try asNobody([lactlPath, "simulate", "match"])
        XCTAssertEqual(simulate.status, 1, simulate.stdout)
        let doctor = try runProcess(lactlPath, ["doctor"])
        XCTAssertEqual(doctor.status, 0, doctor.stdout + doctor.stderr)
        XCTAssertFalse(doctor.stdout.split(separator: "\n").contains { $0.hasPrefix("problem") }, doctor.stdout)
        XCTAssertTrue(doctor.stdout.contains("no problem found"), doctor.stdout)
        XCTAssertTrue(has(doctor.stdout, "note", "sensor"), doctor.stdout)
        try installedAgentDrawsTheSystemDaemonsPrompts(agentPackage)
        terminateAndWait(daemon)
        daemons.removeAll { $0 == daemon }
        // systemd's RemoveOnStop=yes, when the socket unit stops.
        close(listener)
        listener = -1
        unlink(socketPath)
    }

    /// The agent's package beside the daemon's: the program, its user unit (enabled for every
    /// user) and autostart entry; the installed agent, started as a session would start it (no
    /// options), finds the system daemon, which admits it by its installed path (the default:
    /// beside laenclaved); `dpkg -r` takes it all away.
    private func installedAgentDrawsTheSystemDaemonsPrompts(_ package: String) throws {
        let agentPath = "/usr/bin/laenclaved-agent"
        let unit = "/usr/lib/systemd/user/laenclaved-agent.service"
        let autostart = "/etc/xdg/autostart/laenclaved-agent.desktop"
        let enabled = "/etc/systemd/user/graphical-session.target.wants/laenclaved-agent.service"
        let install = try runProcess("/usr/bin/dpkg", ["-i", package], timeout: 300)
        XCTAssertEqual(install.status, 0, install.stdout + install.stderr)
        for (path, mode) in [(agentPath, 0o755), (unit, 0o644), (autostart, 0o644)] {
            let st = try XCTUnwrap(info(path), "\(path) is not installed")
            XCTAssertEqual(st.st_mode & 0o7777, mode_t(mode), path)
            XCTAssertEqual(st.st_uid, 0, path)
        }
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: enabled),
            "the postinst enables the user unit for every user"
        )
        let ldd = try runProcess("/usr/bin/ldd", [agentPath])
        XCTAssertTrue(ldd.stdout.contains("libgtk-4"), ldd.stdout)
        XCTAssertFalse(ldd.stdout.contains("libswift") || ldd.stdout.contains("libFoundation"), ldd.stdout)
        if VirtualDisplay.available {
            let display = try VirtualDisplay()
            let agent = Process()
            agent.executableURL = URL(fileURLWithPath: agentPath)
            agent.environment = display.environment
            agent.standardOutput = FileHandle.nullDevice
            agent.standardError = FileHandle.nullDevice
            try agent.run()
            defer {
                agent.terminate()
                agent.waitUntilExit()
            }
            eventually("the installed agent draws root's prompts", timeout: 20) {
                guard let out = try? runProcess(lactlPath, ["status", "--json"]),
                    let json = try? JSONSerialization.jsonObject(with: Data(out.stdout.utf8)) as? [String: Any]
                else { return false }
                return json["promptAgent"] as? Bool == true
            }
            let doctor = try runProcess(lactlPath, ["doctor"])
            XCTAssertTrue(has(doctor.stdout, "ok", "prompt agent"), doctor.stdout)
        }
        let remove = try runProcess("/usr/bin/dpkg", ["-r", "laenclaved-agent"], timeout: 120)
        XCTAssertEqual(remove.status, 0, remove.stdout + remove.stderr)
        for path in [agentPath, unit, enabled] {
            XCTAssertFalse(
                FileManager.default.fileExists(atPath: path),
                "\(path) is left after dpkg -r laenclaved-agent"
            )
        }
        let purge = try runProcess("/usr/bin/dpkg", ["-P", "laenclaved-agent"], timeout: 120)
        XCTAssertEqual(purge.status, 0, purge.stdout + purge.stderr)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: autostart),
            "dpkg -P removes the autostart entry (a conffile)"
        )
    }

    // MARK: helpers

    private func installed(_ package: String = "laenclaved") -> Bool {
        guard let out = try? runProcess("/usr/bin/dpkg-query", ["-W", "-f=${Status}", package]) else { return false }
        return out.stdout.contains("ok installed") || out.stdout.contains("config-files")
    }

    private func asNobody(_ arguments: [String], input: String = "") throws -> ProcessOutput {
        try runProcess(
            "/usr/sbin/runuser",
            ["-u", "nobody", "--"] + arguments,
            input: input,
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/tmp"]
        )
    }

    /// Whether the doctor printed `marker` (ok, problem, note) for `check`.
    private func has(_ report: String, _ marker: String, _ check: String) -> Bool {
        report.split(separator: "\n").contains { line in
            line.hasPrefix(marker + " ")
                && line.dropFirst(marker.count).trimmingCharacters(in: .whitespaces).hasPrefix(check + ":")
        }
    }

    private func info(_ path: String) -> stat? {
        var st = stat()
        return stat(path, &st) == 0 ? st : nil
    }

    private func modified(_ path: String) throws -> Date {
        try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date ?? .distantPast
    }

    /// A log file the daemon (as laenclaved) may append to.
    private func logFile(_ name: String) throws -> String {
        let path = logDirectory + "/" + name
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil))
        let pw = try XCTUnwrap(getpwnam("laenclaved"))
        chown(path, pw.pointee.pw_uid, pw.pointee.pw_gid)
        chmod(path, 0o600)
        return path
    }

    /// Waits for the daemon's "listening" line; fails (with its log) if it exits or stays silent.
    private func waitUntilListening(
        _ daemon: pid_t,
        log: String,
        file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        var exited = false
        eventually("the daemon to listen", timeout: 20, file: file, line: line) {
            var status: Int32 = 0
            exited = waitpid(daemon, &status, WNOHANG) == daemon
            return exited || daemonLog(log).contains("listening")
        }
        if exited { daemons.removeAll { $0 == daemon } }
        guard !exited, daemonLog(log).contains("listening") else {
            throw EnclaveClientError.unreachable("the daemon did not start: \(daemonLog(log))")
        }
    }

    private func daemonLog(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    /// What laenclaved.socket does: a listening socket at `path` (the system path: laenclaved's, 0666).
    /// Kept above descriptor 3 and close-on-exec until it is handed to a daemon.
    private func listeningSocket(
        at path: String? = nil,
        owner: String? = "laenclaved",
        mode: mode_t = 0o666
    ) throws -> Int32 {
        let path = path ?? socketPath
        let fd = try SocketActivationSupport.listeningSocket(at: path, mode: mode)
        if let owner {
            let pw = try XCTUnwrap(getpwnam(owner))
            chown(path, pw.pointee.pw_uid, pw.pointee.pw_gid)
        }
        return fd
    }

    /// What laenclaved.service does: the daemon as laenclaved with the installed unit's capabilities
    /// only (`AmbientCapabilities=`) and no new privileges (setpriv does not fork), the listening
    /// socket as descriptor 3, LISTEN_PID its pid.
    private func spawnActivated(_ arguments: [String], log: String) throws -> pid_t {
        let unit = try String(contentsOfFile: "/lib/systemd/system/laenclaved.service", encoding: .utf8)
        let capabilities = unit.split(separator: "\n").filter { $0.hasPrefix("AmbientCapabilities=") }
            .flatMap { $0.dropFirst("AmbientCapabilities=".count).split(separator: " ") }
            .map { "+" + $0.lowercased().replacingOccurrences(of: "cap_", with: "") }.joined(separator: ",")
        XCTAssertFalse(capabilities.isEmpty, "the unit grants its capabilities with AmbientCapabilities=")
        return try spawnWithSocket(
            [
                "/usr/bin/setpriv", "--reuid=laenclaved", "--regid=laenclaved", "--init-groups",
                "--inh-caps=-all,\(capabilities)", "--ambient-caps=-all,\(capabilities)",
                "--bounding-set=-all,\(capabilities)",
                "--no-new-privs", "--", daemonPath,
            ] + arguments,
            descriptor: listener,
            log: log
        )
    }

    /// Runs `command` with `descriptor` as its descriptor 3 and the socket-activation variables.
    private func spawnWithSocket(
        _ command: [String],
        descriptor: Int32,
        log: String,
        listenPID: String = "$$"
    ) throws -> pid_t {
        try SocketActivationSupport.spawn(command, descriptors: [descriptor], log: log, listenPID: listenPID)
    }
}
