/// A process's logind session, from the cgroup the kernel records for it: logind puts each session's
/// processes in `session-ID.scope` under the user's slices (`/user.slice/user-1000.slice/
/// session-3.scope`), as libsystemd's `sd_pid_get_session` reads it — and like it, a process in any
/// other unit first (a user service: `user@1000.service/…`) is in no session. Read by the daemon
/// itself, non-blocking (`SandboxEvidenceReader`'s rule: a process may hold a lease on its own
/// `/proc` files, and libsystemd's blocking open would then wait 45 s).
public enum LoginSession {
    /// The session named by the contents of `/proc/PID/cgroup` (nil: none).
    public static func name(cgroup: String) -> String? {
        guard let unit = unit(cgroup: cgroup), unit.hasPrefix("session-"), unit.hasSuffix(".scope") else { return nil }
        let id = unit.dropFirst("session-".count).dropLast(".scope".count)
        return isSessionID(id) ? String(id) : nil
    }

    /// The uid whose service manager runs the process (`user@UID.service`, the first unit of its
    /// cgroup that is not a slice): a terminal GNOME or KDE starts for the user runs there, in no
    /// session. nil: any other unit.
    public static func serviceManagerUID(cgroup: String) -> UInt32? {
        guard let unit = unit(cgroup: cgroup), unit.hasPrefix("user@"), unit.hasSuffix(".service") else { return nil }
        return UInt32(unit.dropFirst("user@".count).dropLast(".service".count))
    }

    /// The session a process stands in for a PAM request (our rule, issue 32): its own; else, for a
    /// process of a user's service manager (GNOME Shell and its polkit agent run there), that
    /// user's display session as logind names it (`/run/systemd/users/UID`, `LoginUserRecord`) —
    /// but only while none of the user's sessions is remote: a process started in the service
    /// manager from an SSH login (`systemd-run --user`) lands there too. `sessionRemote`: whether
    /// a session is remote as logind states it (nil: no record). Such a request is served only
    /// where the prompt agent draws it on the seat (`PAMAuthenticationRules.decide`).
    public static func standing(
        cgroup: String,
        user: (UInt32) -> LoginUserRecord?,
        sessionRemote: (String) -> Bool?
    ) -> String? {
        if let own = name(cgroup: cgroup) { return own }
        guard let uid = serviceManagerUID(cgroup: cgroup), let record = user(uid), let display = record.display,
            record.sessions.allSatisfy({ sessionRemote($0) == false })
        else { return nil }
        return display
    }

    /// The first unit of the cgroup path that is not a slice. The path is the third field of
    /// systemd's own named hierarchy's line where there is one (legacy and hybrid set-ups), else
    /// of the unified one's ("0::PATH"); it may hold colons itself — a user names the cgroups
    /// below their own service manager — so it is never cut at the last one.
    private static func unit(cgroup: String) -> Substring? {
        var unified: Substring?
        var named: Substring?
        for line in cgroup.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            if fields[1] == "name=systemd" {
                named = named ?? fields[2]
            } else if fields[0] == "0" && fields[1].isEmpty {
                unified = unified ?? fields[2]
            }
        }
        return (named ?? unified)?.split(separator: "/").first(where: { !$0.hasSuffix(".slice") })
    }

    /// A session id as logind makes them: letters and digits, 1 to 64 of them.
    public static func isSessionID(_ id: Substring) -> Bool {
        !id.isEmpty && id.utf8.count <= 64
            && id.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) })
    }
}

/// What logind states of one session in `/run/systemd/sessions/ID` (the file libsystemd's
/// `sd_session_is_remote` and `sd_session_get_seat` read): `KEY=value` lines, written by logind
/// alone (root's directory).
public struct LoginSessionRecord: Equatable, Sendable {
    /// REMOTE=1: logind was told the session came over the network (sshd's, a remote X login).
    public var remote: Bool
    /// SEAT: the seat it runs on (nil: none, as for SSH, cron, or a user's own service).
    public var seat: String?
    /// TTY: the terminal logind knows the session by, if any.
    public var tty: String?
    /// UID: whose session it is.
    public var uid: UInt32?

    public init(remote: Bool, seat: String?, tty: String? = nil, uid: UInt32? = nil) {
        self.remote = remote
        self.seat = seat
        self.tty = tty
        self.uid = uid
    }

    /// nil when the text names no session (no `REMOTE`, `SEAT` or `UID` line: not logind's file).
    public init?(text: String) {
        var values: [Substring: Substring] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[line[..<equals]] = line[line.index(after: equals)...]
        }
        guard values["UID"] != nil || values["REMOTE"] != nil || values["SEAT"] != nil else { return nil }
        remote = values["REMOTE"] == "1"
        seat = values["SEAT"].flatMap { $0.isEmpty ? nil : String($0) }
        tty = values["TTY"].flatMap { $0.isEmpty ? nil : String($0) }
        uid = values["UID"].flatMap { UInt32($0) }
    }
}

/// What logind states of one user in `/run/systemd/users/UID`: the display session (`DISPLAY=`,
/// the graphical one its service manager's windows are shown in) and every session (`SESSIONS=`).
public struct LoginUserRecord: Equatable, Sendable {
    public var display: String?
    public var sessions: [String]

    public init(display: String?, sessions: [String]) {
        self.display = display
        self.sessions = sessions
    }

    public init(text: String) {
        var display: String?
        var sessions: [String] = []
        for line in text.split(separator: "\n") {
            if line.hasPrefix("DISPLAY=") {
                let id = line.dropFirst("DISPLAY=".count)
                display = LoginSession.isSessionID(id) ? String(id) : nil
            } else if line.hasPrefix("SESSIONS=") {
                sessions = line.dropFirst("SESSIONS=".count).split(separator: " ").map(String.init)
            }
        }
        self.init(display: display, sessions: sessions)
    }
}
