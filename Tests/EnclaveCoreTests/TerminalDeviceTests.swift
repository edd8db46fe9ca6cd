import EnclaveCore
import EnclaveProtocol
import XCTest

final class TerminalDeviceTests: XCTestCase {
    func testTheKernelsNumbering() {
        // /dev/pts/3 is 136:3; /dev/pts/300 is 136:300 (a minor above 255, in the high bits); /dev/tty1 is 4:1.
        XCTAssertEqual(TerminalDevice(ttyNr: 34819), TerminalDevice(major: 136, minor: 3))
        XCTAssertEqual(
            TerminalDevice(ttyNr: Int64(136 << 8) | Int64(300 & 0xff) | Int64((300 & ~0xff) << 12)),
            TerminalDevice(major: 136, minor: 300)
        )
        XCTAssertEqual(TerminalDevice(ttyNr: 1025), TerminalDevice(major: 4, minor: 1))
        XCTAssertNil(TerminalDevice(ttyNr: 0), "no controlling terminal")
    }

    func testTheControllingTerminalIsReadPastACommandWithSpacesAndParentheses() {
        let stat = "4242 (my (odd) app) S 1 4242 4242 34819 4242 4194560 0 0 0 0"
        XCTAssertEqual(TerminalDevice.controllingTerminal(stat: stat), TerminalDevice(major: 136, minor: 3))
        XCTAssertNil(TerminalDevice.controllingTerminal(stat: "4242 (daemon) S 1 4242 4242 0 -1 0"))
        XCTAssertNil(TerminalDevice.controllingTerminal(stat: "garbage"))
    }
}
