import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where the daemon listens and keeps its state. Both sides use this one definition.
public enum EnclavePaths {
    /// Client override: talk to this socket, never auto-start a daemon.
    public static let socketEnvironmentKey = "LAENCLAVED_SOCKET"
    /// Client override: the daemon binary to auto-start.
    public static let daemonEnvironmentKey = "LAENCLAVED_PATH"
    public static let systemSocket = "/run/laenclaved/socket"
    public static let systemStateDirectory = "/var/lib/laenclaved"

    /// The user daemon's socket: under `$XDG_RUNTIME_DIR`; without it (an ssh or cron session
    /// that did not set it), under logind's `/run/user/UID` when that is the user's, else in the
    /// user's own state directory — never first in a shared directory such as /tmp, where another
    /// user could create the directory before the user's daemon does (our rule; the daemon refuses
    /// a directory it does not own). /tmp only when the state directory's path is too long for a
    /// socket (108 bytes).
    /// `variable` reads the environment (the process's, by default: a client resolves its daemon
    /// for every context, and `getenv` reads the two or three variables it needs where
    /// `ProcessInfo.environment` copies them all).
    public static func userSocket(variable: (String) -> String? = processVariable) -> String {
        if let runtime = variable("XDG_RUNTIME_DIR"), !runtime.isEmpty {
            return runtime + "/laenclaved/socket"
        }
        let uid = getuid()
        var info = stat()
        let logind = "/run/user/\(uid)"
        if stat(logind, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == uid {
            return logind + "/laenclaved/socket"
        }
        let own = userStateDirectory(variable: variable) + "/run/socket"
        if (own + handoffSuffix).utf8.count < 108 { return own }
        return "/tmp/laenclaved-\(uid)/socket"
    }

    /// The handoff socket beside a daemon's socket (`Handoff`): same directory, same guard.
    public static func handoffSocket(for socketPath: String) -> String { socketPath + handoffSuffix }
    public static let handoffSuffix = ".handoff"

    /// Where the user-mode daemon of `uid` listens when that user's session has the usual
    /// `XDG_RUNTIME_DIR` (/run/user/UID), as root finds it to administer it.
    public static func userSocket(ofUser uid: UInt32) -> String { "/run/user/\(uid)/laenclaved/socket" }

    public static let systemMasterKey = "/etc/laenclaved/master.key"
    public static let systemConfiguration = "/etc/laenclaved/laenclaved.conf"

    /// User mode's configuration file, beside the master key.
    public static func userConfiguration(variable: (String) -> String? = processVariable) -> String {
        (userMasterKey(variable: variable) as NSString).deletingLastPathComponent + "/laenclaved.conf"
    }

    /// User mode: under $XDG_CONFIG_HOME, apart from the state directory.
    public static func userMasterKey(variable: (String) -> String? = processVariable) -> String {
        if let config = variable("XDG_CONFIG_HOME"), !config.isEmpty { return config + "/laenclaved/master.key" }
        return home(variable: variable) + "/.config/laenclaved/master.key"
    }

    public static func userStateDirectory(variable: (String) -> String? = processVariable) -> String {
        if let data = variable("XDG_DATA_HOME"), !data.isEmpty { return data + "/laenclaved" }
        return home(variable: variable) + "/.local/share/laenclaved"
    }

    /// The user's home: `HOME`, else the passwd entry's. Our choice when there is neither (a
    /// container run under a uid with no passwd entry, `HOME` unset): "/nonexistent", Debian's
    /// home for users who have none — what is kept there cannot be created, and says so, where
    /// the lookup used to crash the daemon and every app that looked for it.
    static func home(
        variable: (String) -> String?,
        passwdHome: () -> String? = { getpwuid(getuid()).map { String(cString: $0.pointee.pw_dir) } }
    ) -> String {
        if let home = variable("HOME"), !home.isEmpty { return home }
        if let home = passwdHome(), !home.isEmpty { return home }
        return "/nonexistent"
    }

    /// A variable of this process's environment, as it is now.
    public static func processVariable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
