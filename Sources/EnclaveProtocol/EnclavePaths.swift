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

    public static func userSocket(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return runtime + "/laenclaved/socket"
        }
        return "/tmp/laenclaved-\(getuid())/socket"
    }

    /// Where the user-mode daemon of `uid` listens when that user's session has the usual
    /// `XDG_RUNTIME_DIR` (/run/user/UID), as root finds it to administer it.
    public static func userSocket(ofUser uid: UInt32) -> String { "/run/user/\(uid)/laenclaved/socket" }

    public static let systemMasterKey = "/etc/laenclaved/master.key"
    public static let systemConfiguration = "/etc/laenclaved/laenclaved.conf"

    /// User mode's configuration file, beside the master key.
    public static func userConfiguration(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        (userMasterKey(environment: environment) as NSString).deletingLastPathComponent + "/laenclaved.conf"
    }

    /// User mode: under $XDG_CONFIG_HOME, apart from the state directory.
    public static func userMasterKey(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let config = environment["XDG_CONFIG_HOME"], !config.isEmpty { return config + "/laenclaved/master.key" }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? String(cString: getpwuid(getuid()).pointee.pw_dir)
        return home + "/.config/laenclaved/master.key"
    }

    public static func userStateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let data = environment["XDG_DATA_HOME"], !data.isEmpty { return data + "/laenclaved" }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? String(cString: getpwuid(getuid()).pointee.pw_dir)
        return home + "/.local/share/laenclaved"
    }
}
