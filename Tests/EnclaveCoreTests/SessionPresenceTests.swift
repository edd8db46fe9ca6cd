import EnclaveCore
import XCTest

/// `SessionPresence`: the reader is armed only for the user logind says is at the machine.
final class SessionPresenceTests: XCTestCase {
    func testOnlyAnActiveUserMayArmTheReader() {
        let table: [(state: String?, armed: Bool)] = [
            ("active", true), ("online", false), ("lingering", false), ("closing", false), ("offline", false),
            ("", false), (nil, false),
        ]
        for row in table {
            XCTAssertEqual(SessionPresence.mayArmReader(userState: row.state), row.armed, String(describing: row.state))
            if !row.armed {
                XCTAssertTrue(SessionPresence.refusal(uid: 1000, userState: row.state).contains("uid 1000"))
            }
        }
    }
}
