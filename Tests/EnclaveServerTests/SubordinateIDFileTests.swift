import EnclaveCore
import Foundation
import XCTest

@testable import EnclaveServer

/// /etc/subuid, read again when it changes, and none when it is not there.
final class SubordinateIDFileTests: XCTestCase {
    func testTheFileIsReadAgainWhenItChanges() throws {
        let path = NSTemporaryDirectory() + "la-subuid-\(UUID().uuidString.prefix(8))"
        defer { unlink(path) }
        let file = SubordinateIDFile(path: path)
        XCTAssertEqual(file.current, SubordinateIDs(), "no file: no ranges")
        try "0:100000:65536\n".write(toFile: path, atomically: false, encoding: .utf8)
        XCTAssertEqual(file.current.owner(of: 100_000), 0)
        XCTAssertEqual(file.current.owner(of: 200_000), nil)
        try "0:100000:65536\n1:200000:65536\n".write(toFile: path, atomically: false, encoding: .utf8)
        XCTAssertEqual(file.current.owner(of: 200_000), 1, "read again once changed")
        unlink(path)
        XCTAssertEqual(file.current, SubordinateIDs(), "gone: no ranges")
    }
}
