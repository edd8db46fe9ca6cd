import EnclaveCore
import XCTest

/// When the daemon serves its handoff socket, by setting and kernel, and what it says when not.
final class HandoffSocketSettingTests: XCTestCase {
    func testWhetherTheSocketIsServed() {
        let rows: [(HandoffSocketSetting, kernelRefuses: Bool, serves: Bool)] = [
            (.always, true, true),
            (.always, false, true),
            (.ifKernelRefuses, true, true),
            (.ifKernelRefuses, false, false),
            (.never, true, false),
            (.never, false, false),
        ]
        for (setting, refuses, serves) in rows {
            XCTAssertEqual(setting.serves(kernelRefusesUnasked: refuses), serves, "\(setting) \(refuses)")
            XCTAssertEqual(setting.whyNone(kernelRefusesUnasked: refuses) == nil, serves, "\(setting) \(refuses)")
        }
    }

    func testWhyNoneNamesTheSettingAndTheKernel() {
        XCTAssertEqual(HandoffSocketSetting.never.whyNone(kernelRefusesUnasked: true), "handoff = never")
        let old = HandoffSocketSetting.ifKernelRefuses.whyNone(kernelRefusesUnasked: false) ?? ""
        XCTAssertTrue(old.hasPrefix("handoff = if-kernel-refuses"), old)
        XCTAssertTrue(old.contains("Linux 6.16"), old)
    }
}
