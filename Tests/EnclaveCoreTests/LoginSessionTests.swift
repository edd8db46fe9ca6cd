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
            // A user names the cgroups below their own service manager: a colon there is part of
            // the path (the kernel refuses only newlines), never where the path starts.
            ("0::/user.slice/user-1001.slice/user@1001.service/x:session-3.scope\n", nil, "a colon in a name"),
            (
                "0::/user.slice/user-1001.slice/user@1001.service/a:name=systemd:/session-3.scope\n", nil,
                "a name that looks like systemd's named hierarchy"
            ),
            ("", nil, "nothing"),
        ]
        for c in cases { XCTAssertEqual(LoginSession.name(cgroup: c.cgroup), c.session, c.why) }
    }

    /// The session a PAM request stands in: its own; else, for a process of a user's service
    /// manager (GNOME's and KDE's terminals), that user's display session as logind names it —
    /// while none of the user's sessions is remote (`systemd-run --user` from SSH lands there too).
    func testAServiceManagersProcessStandsInItsUsersDisplaySession() {
        let users: [UInt32: LoginUserRecord] = [
            1000: LoginUserRecord(text: "UID=1000\nSTATE=active\nDISPLAY=3\nSESSIONS=3 7\n"),
            1002: LoginUserRecord(text: "UID=1002\nSTATE=active\nDISPLAY=4\nSESSIONS=4 9\n"),
            1003: LoginUserRecord(text: "UID=1003\nSTATE=active\nDISPLAY=5\nSESSIONS=5 gone\n"),
        ]
        let remote: [String: Bool] = ["3": false, "7": false, "4": false, "9": true, "5": false]
        func standing(_ cgroup: String) -> String? {
            LoginSession.standing(cgroup: cgroup, user: { users[$0] }, sessionRemote: { remote[$0] })
        }
        let manager = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
        let cases: [(cgroup: String, standing: String?, why: String)] = [
            ("0::/user.slice/user-1000.slice/session-5.scope\n", "5", "its own session first"),
            (
                manager + "app-org.gnome.Terminal.slice/vte-spawn-1.scope\n", "3",
                "a terminal of the user's service manager: the user's display session"
            ),
            ("0::/user.slice/user-1001.slice/user@1001.service/app.slice/x.scope\n", nil, "no record of the user"),
            (
                "0::/user.slice/user-1002.slice/user@1002.service/app.slice/x.scope\n", nil,
                "the user is logged in over SSH too"
            ),
            (
                "0::/user.slice/user-1003.slice/user@1003.service/app.slice/x.scope\n", nil,
                "a session of the user's logind no longer states"
            ),
            ("0::/user.slice/user-1000.slice/user@1000x.service/app.slice/x.scope\n", nil, "not a uid"),
            ("0::/system.slice/user@1000.service.d/x.scope\n", nil, "not the user's service manager unit"),
            ("0::/system.slice/ssh.service\n", nil, "a system service"),
            ("0::/\n", nil, "the root cgroup"),
            // The cgroups below a user's service manager are the user's to name: a colon in a name
            // is part of the path, never where it starts.
            (
                "0::/user.slice/user-1001.slice/user@1001.service/x:session-3.scope\n", nil,
                "a name with a colon names no session"
            ),
            (
                "0::/user.slice/user-1001.slice/user@1001.service/x:user@1000.service/y.scope\n", nil,
                "nor another user's manager"
            ),
            (
                "0::/user.slice/user-1001.slice/user@1001.service/a:name=systemd:/user.slice/user-1000.slice/session-3.scope\n",
                nil, "nor systemd's named hierarchy"
            ),
        ]
        for c in cases { XCTAssertEqual(standing(c.cgroup), c.standing, c.why) }
        XCTAssertEqual(
            LoginUserRecord(text: "UID=1000\nDISPLAY=3\nSESSIONS=3 7\n"),
            .init(display: "3", sessions: ["3", "7"])
        )
        XCTAssertEqual(LoginUserRecord(text: "UID=1000\nSTATE=lingering\nDISPLAY=\n").display, nil)
        XCTAssertEqual(LoginUserRecord(text: "UID=1000\nDISPLAY=../3\n").display, nil)
        XCTAssertEqual(LoginUserRecord(text: "UID=1000\n"), .init(display: nil, sessions: []))
    }

    /// logind's record of a session, as `sd_session_is_remote` and `sd_session_get_seat` read it.
    func testLogindsSessionRecordSaysRemoteAndSeat() {
        let cases: [(text: String, record: LoginSessionRecord?, why: String)] = [
            (
                "# This is private data. Do not parse.\nUID=1000\nUSER=alice\nACTIVE=1\nREMOTE=0\nTYPE=wayland\nSEAT=seat0\nVTNR=2\nTTY=tty2\n",
                LoginSessionRecord(remote: false, seat: "seat0", tty: "tty2", uid: 1000),
                "a graphical session at the seat"
            ),
            (
                "UID=1000\nREMOTE=1\nREMOTE_HOST=203.0.113.9\nSERVICE=sshd\nTTY=/dev/pts/4\n",
                LoginSessionRecord(remote: true, seat: nil, tty: "/dev/pts/4", uid: 1000), "SSH"
            ),
            ("UID=1000\nSEAT=\n", LoginSessionRecord(remote: false, seat: nil, uid: 1000), "an empty seat is none"),
            (
                "UID=1000\nREMOTE=yes\n", LoginSessionRecord(remote: false, seat: nil, uid: 1000),
                "only 1 is remote, as logind writes it"
            ),
            (
                "UID=alice\nSEAT=seat0\n", LoginSessionRecord(remote: false, seat: "seat0"),
                "a uid that is no number is none"
            ),
            ("", nil, "an empty file"),
            ("garbage without keys", nil, "not logind's"),
        ]
        for c in cases {
            XCTAssertEqual(LoginSessionRecord(text: c.text), c.record, c.why)
        }
    }
}
