import EnclaveCore
import XCTest

/// Which logind session a process's cgroup names, as `sd_pid_get_session` reads it.
final class LoginSessionTests: XCTestCase {
    func testTheSessionIsTheFirstUnitBelowTheSlices() {
        let cases: [(cgroup: String, session: String?, why: String)] = [
            ("0::/user.slice/user-1000.slice/session-3.scope\n", "3", "a process of a login session"),
            ("0::/user.slice/user-1000.slice/session-c2.scope/app.scope\n", "c2", "a scope below the session's"),
            (
                "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Terminal.scope\n", nil,
                "an app the user's service manager started: no session"
            ),
            ("0::/system.slice/ssh.service\n", nil, "a system service"),
            ("0::/\n", nil, "the root cgroup (a container)"),
            (
                "12:pids:/user.slice\n1:name=systemd:/user.slice/user-1000.slice/session-7.scope\n0::/\n", "7",
                "hybrid: systemd's named hierarchy, not the unified one"
            ),
            (
                "12:pids:/user.slice\n1:name=systemd:/user.slice/user-1000.slice/session-7.scope\n", "7",
                "legacy: systemd's named hierarchy"
            ),
            ("0::/user.slice/user-1000.slice/session-.scope\n", nil, "an empty id"),
            ("0::/user.slice/user-1000.slice/session-3/../x.scope\n", nil, "not an id"),
            ("", nil, "nothing"),
        ]
        for c in cases { XCTAssertEqual(LoginSession.name(cgroup: c.cgroup), c.session, c.why) }
    }
}
