import EnclaveClient
import Foundation
import IntegrationSupport

#if canImport(Glibc)
import Glibc
#endif

/// A D-Bus bus of the test's own standing in for the system bus (`DBUS_SYSTEM_BUS_ADDRESS`), for
/// fprintd, polkitd and their clients. Anyone may own names, send and listen: polkitd never
/// finishes starting on a bus without the eavesdrop rules.
struct PrivateSystemBus {
    let pid: pid_t
    let address: String

    /// Starts `dbus-daemon` with its socket and configuration in `directory`; the socket is open to
    /// every user, for clients that run as other users (`runuser`).
    init(directory: String) throws {
        let socket = directory + "/bus.sock"
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <listen>unix:path=\(socket)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/></policy>
        </busconfig>
        """.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        pid = try DaemonLauncher.spawn("/usr/bin/dbus-daemon", ["--config-file=\(directory)/bus.conf", "--nofork"])
        address = "unix:path=\(socket)"
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: socket) {
            guard Date() < deadline else {
                terminateAndWait(pid)
                throw NSError(
                    domain: "dbus",
                    code: 1,
                    userInfo: [NSLocalizedDescriptionKey: "the private bus did not start within 10 s"]
                )
            }
            usleep(10_000)
        }
        chmod(socket, 0o666)
    }

    /// What a process needs to use this bus as its system bus.
    var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": address] }
}
