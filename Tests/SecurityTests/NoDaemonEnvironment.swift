import Foundation
import XCTest

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

/// A suite whose calls must never reach or start a daemon.
class NoDaemonTestCase: XCTestCase {
    private var environment: NoDaemonEnvironment?

    override func setUp() {
        super.setUp()
        environment = NoDaemonEnvironment()
    }

    override func tearDown() {
        environment?.restore()
        super.tearDown()
    }
}
