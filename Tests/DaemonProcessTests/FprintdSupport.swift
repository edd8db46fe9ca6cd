import EnclaveClient
import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A fresh, private fprintd for one test (../shared/notes/fprintd.md): a `PrivateSystemBus`,
/// python-dbusmock's polkit allowing fprintd's actions, and the real fprintd with libfprint's
/// virtual device, driven through its socket.
final class FprintdStack {
    let directory: String
    let busAddress: String
    let deviceSocket: String
    private var bus: pid_t = 0
    private var polkit: pid_t = 0
    private var logind: pid_t = 0
    private(set) var fprintd: pid_t = 0

    static var available: Bool {
        ["/usr/libexec/fprintd", "/usr/bin/dbus-daemon", "/usr/bin/gdbus"].allSatisfy(
            FileManager.default.isExecutableFile(atPath:)
        )
            && FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/dbusmock")
    }

    init() throws {
        guard Self.available else {
            throw XCTSkip("fprintd, dbus and python3-dbusmock are needed (scripts/setup-debian installs them)")
        }
        var template = Array("/tmp/la-fp-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        deviceSocket = directory + "/vdev.sock"
        try FileManager.default.createDirectory(atPath: directory + "/state", withIntermediateDirectories: true)
        let privateBus = try PrivateSystemBus(directory: directory)
        busAddress = privateBus.address
        bus = privateBus.pid
        do {
            polkit = try DaemonLauncher.spawn(
                "/usr/bin/python3",
                ["-m", "dbusmock", "--system", "-t", "polkitd"],
                environment: environment
            )
            try gdbus(["wait", "--system", "--timeout", "10", "org.freedesktop.PolicyKit1"])
            try gdbus([
                "call", "--system", "-d", "org.freedesktop.PolicyKit1", "-o", "/org/freedesktop/PolicyKit1/Authority",
                "-m", "org.freedesktop.DBus.Mock.SetAllowed",
                "['net.reactivated.fprint.device.enroll','net.reactivated.fprint.device.verify','net.reactivated.fprint.device.setusername']",
            ])
            // logind, with the test's user at the machine (the daemon arms the reader only then).
            logind = try DaemonLauncher.spawn(
                "/usr/bin/python3",
                ["-m", "dbusmock", "--system", "-t", "logind"],
                environment: environment
            )
            try gdbus(["wait", "--system", "--timeout", "10", "org.freedesktop.login1"])
            try gdbus([
                "call", "--system", "-d", "org.freedesktop.login1", "-o", "/org/freedesktop/login1",
                "-m", "org.freedesktop.DBus.Mock.AddSession", "c1", "seat0", String(getuid()), "tester", "true",
            ])
            // Debian 12's dbusmock answers GetUser with a TypeError (it adds a str to a UInt32).
            try gdbus([
                "call", "--system", "-d", "org.freedesktop.login1", "-o", "/org/freedesktop/login1",
                "-m", "org.freedesktop.DBus.Mock.AddMethod", "org.freedesktop.login1.Manager", "GetUser", "u", "o",
                "ret = '/org/freedesktop/login1/user/%u' % args[0]",
            ])
            try startFprintd()
        } catch {
            stop()
            throw error
        }
    }

    deinit {
        stop()
        // LA_KEEP_FPRINTD_STACK=1 keeps the directory, fprintd's debug log with it, to read after a run.
        if ProcessInfo.processInfo.environment["LA_KEEP_FPRINTD_STACK"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// What a process needs to use this stack as its system bus.
    var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": busAddress] }

    func startFprintd() throws {
        fprintd = try DaemonLauncher.spawn(
            "/bin/sh",
            ["-c", "exec /usr/libexec/fprintd -t >>\"$0\" 2>&1", directory + "/fprintd.log"],
            environment: environment.merging([
                "G_MESSAGES_DEBUG": "all",
                "FP_VIRTUAL_DEVICE": deviceSocket, "FP_DRIVERS_WHITELIST": "virtual_device",
                "FP_DRIVERS_ALLOWLIST": "virtual_device",
                "STATE_DIRECTORY": directory + "/state",
            ]) { $1 }
        )
        try gdbus(["wait", "--system", "--timeout", "10", "net.reactivated.Fprint"])
    }

    /// What logind says of the test's user: "active" (at the machine), "online" (logged in
    /// elsewhere: ssh, another seat's background), …
    func setLoginState(_ state: String) throws {
        try gdbus([
            "call", "--system", "-d", "org.freedesktop.login1", "-o", "/org/freedesktop/login1/user/\(getuid())",
            "-m", "org.freedesktop.DBus.Mock.UpdateProperties", "org.freedesktop.login1.User",
            "{'State': <'\(state)'>}",
        ])
    }

    /// SIGKILL: fprintd dies at whatever point it is.
    func killFprintd() {
        guard fprintd > 0 else { return }
        kill(fprintd, SIGKILL)
        var status: Int32 = 0
        waitpid(fprintd, &status, 0)
        fprintd = 0
        unlink(deviceSocket)
    }

    private func stop() {
        killFprintd()
        for pid in [polkit, logind, bus] where pid > 0 { terminateAndWait(pid, grace: 3) }
        polkit = 0
        logind = 0
        bus = 0
    }

    /// Sends one command to the virtual device once it listens (it does only while the reader is
    /// claimed): the test's finger arrives after the daemon armed the reader.
    func device(_ command: String, timeout: Double = 10) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let fd = try? EnclaveConnection.connectSocket(deviceSocket) {
                defer { close(fd) }
                _ = command.withCString { send(fd, $0, strlen($0), 0) }
                var buffer = [UInt8](repeating: 0, count: 256)
                var received = 0
                repeat { received = recv(fd, &buffer, buffer.count, 0) } while received > 0
                // The device closes a connection it has read; a reset means the reader closed
                // before reading it: released in the middle of an operation, which loses fingers.
                if received == 0 { return }
                throw NSError(
                    domain: "fprintd",
                    code: 3,
                    userInfo: [
                        NSLocalizedDescriptionKey:
                            "the virtual reader closed before reading \(command) (released mid-operation?)"
                    ]
                )
            }
            usleep(10_000)
        }
        throw NSError(
            domain: "fprintd",
            code: 1,
            userInfo: [
                NSLocalizedDescriptionKey: "the virtual reader did not listen within \(timeout) s (never claimed)"
            ]
        )
    }

    /// Waits until the reader is released (its socket stops accepting), so the next command
    /// cannot be eaten by the operation that just ended.
    func waitUntilReleased(timeout: Double = 10) throws {
        try eventuallyTrue("the reader to be released", timeout: timeout) {
            guard let fd = try? EnclaveConnection.connectSocket(self.deviceSocket) else { return true }
            close(fd)
            return false
        }
    }

    /// Waits until the reader is claimed and listening (a verify or enrol is under way).
    func waitUntilClaimed(timeout: Double = 10) throws {
        try eventuallyTrue("the reader to be claimed", timeout: timeout) {
            guard let fd = try? EnclaveConnection.connectSocket(self.deviceSocket) else { return false }
            close(fd)
            return true
        }
    }

    /// What fprintd and the virtual reader did, from fprintd's own log (G_MESSAGES_DEBUG=all): the
    /// commands the reader got and used, the D-Bus methods called, results and warnings; for
    /// failure messages.
    func log() -> String {
        let all = (try? String(contentsOfFile: directory + "/fprintd.log", encoding: .utf8)) ?? ""
        let events = [
            "Received command", "Processing command", "Could not process", "scanned print", "Authorization granted",
            "report_verify_status", "verify_cb", "enroll_cb", "Completing action", "WARNING", "CRITICAL",
        ]
        let lines = all.split(separator: "\n").filter { line in events.contains { line.contains($0) } }
        return lines.suffix(80).joined(separator: "\n")
    }

    /// Enrolled fingers as fprintd itself lists them.
    func enrolled(user: String) throws -> String {
        let out = try runProcess(
            "/usr/bin/gdbus",
            [
                "call", "--system", "-d", "net.reactivated.Fprint", "-o", "/net/reactivated/Fprint/Device/0",
                "-m", "net.reactivated.Fprint.Device.ListEnrolledFingers", user,
            ],
            environment: processEnvironment
        )
        return out.stdout + out.stderr
    }

    /// The number in the newest unique name the private bus gave out (":1.N"): how many
    /// connections were made so far, this query's own included.
    func newestConnectionNumber() throws -> Int {
        let out = try runProcess(
            "/usr/bin/gdbus",
            [
                "call", "--system", "-d", "org.freedesktop.DBus", "-o", "/org/freedesktop/DBus",
                "-m", "org.freedesktop.DBus.ListNames",
            ],
            environment: processEnvironment
        )
        let numbers = out.stdout.split(separator: "'").compactMap { name in
            name.hasPrefix(":1.") ? Int(name.dropFirst(3)) : nil
        }
        guard let newest = numbers.max() else {
            throw NSError(
                domain: "fprintd",
                code: 5,
                userInfo: [NSLocalizedDescriptionKey: "no unique names: \(out.stdout) \(out.stderr)"]
            )
        }
        return newest
    }

    /// Deletes `user`'s prints through fprintd, as GNOME Settings or fprintd-delete would.
    func deletePrints(user: String) throws {
        let script = """
            import dbus, sys
            bus = dbus.SystemBus()
            device = dbus.Interface(bus.get_object("net.reactivated.Fprint", "/net/reactivated/Fprint/Device/0"), "net.reactivated.Fprint.Device")
            device.Claim(sys.argv[1])
            device.DeleteEnrolledFingers2()
            device.Release()
            """
        let out = try runProcess(
            "/usr/bin/python3",
            ["-c", script, user],
            environment: processEnvironment,
            timeout: 20
        )
        guard out.status == 0 else {
            throw NSError(
                domain: "fprintd",
                code: 6,
                userInfo: [NSLocalizedDescriptionKey: "deleting the prints: \(out.stderr)"]
            )
        }
    }

    /// Another user at the machine, as logind's mock says it: an active session of theirs on seat0.
    func addUserAtTheMachine(uid: uid_t, name: String) throws {
        try gdbus([
            "call", "--system", "-d", "org.freedesktop.login1", "-o", "/org/freedesktop/login1",
            "-m", "org.freedesktop.DBus.Mock.AddSession", "c\(uid)", "seat0", String(uid), name, "true",
        ])
    }

    var processEnvironment: [String: String] { ProcessInfo.processInfo.environment.merging(environment) { $1 } }

    private func gdbus(_ arguments: [String]) throws {
        let out = try runProcess("/usr/bin/gdbus", arguments, environment: processEnvironment, timeout: 20)
        guard out.status == 0 else {
            throw NSError(
                domain: "fprintd",
                code: Int(out.status),
                userInfo: [
                    NSLocalizedDescriptionKey: "gdbus \(arguments.prefix(2).joined(separator: " ")): \(out.stderr)"
                ]
            )
        }
    }

    private func eventuallyTrue(_ what: String, timeout: Double = 10, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return }
            usleep(10_000)
        }
        throw NSError(
            domain: "fprintd",
            code: 2,
            userInfo: [NSLocalizedDescriptionKey: "timed out waiting for \(what)"]
        )
    }
}
