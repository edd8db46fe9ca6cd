import EnclaveCore
import EnclaveProtocol
import XCTest

/// Who may hand the daemon a descriptor, by setting and kernel, and what it says to the others.
final class HandoffSocketSettingTests: XCTestCase {
    func testWhoMayHandOver() {
        let old =
            "handoff = if-kernel-refuses, and this kernel cannot refuse descriptors sent unasked (SO_PASSRIGHTS: Linux 6.16)"
        let rows: [(HandoffSocketSetting, kernelRefuses: Bool, HandoffSocketSetting.Access)] = [
            (.always, true, .everyone),
            (.always, false, .everyone),
            (.ifKernelRefuses, true, .everyone),
            (.ifKernelRefuses, false, .rootOnly(why: old)),
            (.root, true, .rootOnly(why: "handoff = root")),
            (.root, false, .rootOnly(why: "handoff = root")),
            (.never, true, .nobody(why: "handoff = never")),
            (.never, false, .nobody(why: "handoff = never")),
        ]
        for (setting, refuses, access) in rows {
            XCTAssertEqual(
                setting.access(kernelRefusesUnasked: refuses, mode: .system),
                access,
                "\(setting) \(refuses)"
            )
        }
    }

    /// A user-mode daemon's socket is its user's alone already: root only would refuse only them.
    func testAUserModeDaemonTakesItsUsersHandoffsUnlessToldNever() {
        for setting in HandoffSocketSetting.allCases {
            for refuses in [true, false] {
                XCTAssertEqual(
                    setting.access(kernelRefusesUnasked: refuses, mode: .user),
                    setting == .never ? .nobody(why: "handoff = never") : .everyone,
                    "\(setting) \(refuses)"
                )
            }
        }
    }
}
