import XCTest

@testable import EnclaveProtocol

/// Where the user-mode daemon keeps its files: under the XDG directories when they are set, else
/// under the user's home, which is `HOME`, else the passwd entry's, else "/nonexistent".
final class EnclavePathsTests: XCTestCase {
    func testTheHomeIsHOMEThenThePasswdEntryThenNowhere() {
        let rows: [(home: String?, passwd: String?, expected: String)] = [
            ("/home/a", "/home/b", "/home/a"), ("", "/home/b", "/home/b"), (nil, "/home/b", "/home/b"),
            (nil, nil, "/nonexistent"), ("", "", "/nonexistent"),
        ]
        for row in rows {
            let home = EnclavePaths.home(variable: { $0 == "HOME" ? row.home : nil }, passwdHome: { row.passwd })
            XCTAssertEqual(home, row.expected, "\(row)")
        }
    }

    func testTheStateAndTheKeyFollowTheXDGDirectoriesOrTheHome() {
        let xdg: [String: String] = ["XDG_DATA_HOME": "/d", "XDG_CONFIG_HOME": "/c", "HOME": "/h"]
        XCTAssertEqual(EnclavePaths.userStateDirectory(variable: { xdg[$0] }), "/d/laenclaved")
        XCTAssertEqual(EnclavePaths.userMasterKey(variable: { xdg[$0] }), "/c/laenclaved/master.key")
        XCTAssertEqual(EnclavePaths.userConfiguration(variable: { xdg[$0] }), "/c/laenclaved/laenclaved.conf")
        let home = ["HOME": "/h"]
        XCTAssertEqual(EnclavePaths.userStateDirectory(variable: { home[$0] }), "/h/.local/share/laenclaved")
        XCTAssertEqual(EnclavePaths.userMasterKey(variable: { home[$0] }), "/h/.config/laenclaved/master.key")
    }
}
