import Foundation

/// Points `LAENCLAVED_SOCKET` at a path where nothing answers (so no daemon is ever auto-started)
/// and restores the previous value afterwards, so other suites in the same process are unaffected.
struct NoDaemonEnvironment {
    static let key = "LAENCLAVED_SOCKET"
    private let saved: String?

    init() {
        saved = ProcessInfo.processInfo.environment[Self.key]
        setenv(Self.key, "/tmp/no-such-daemon/socket", 1)
    }

    func restore() {
        if let saved { setenv(Self.key, saved, 1) } else { unsetenv(Self.key) }
    }
}
