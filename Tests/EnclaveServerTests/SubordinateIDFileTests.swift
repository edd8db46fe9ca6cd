import EnclaveCore
import Foundation
import IntegrationSupport
import XCTest

@testable import EnclaveServer

/// /etc/subuid, read again (off the caller's thread) when it changes, and none when it is not there.
final class SubordinateIDFileTests: XCTestCase {
    private var path = ""

    override func setUp() { path = NSTemporaryDirectory() + "la-subuid-\(UUID().uuidString.prefix(8))" }
    override func tearDown() { unlink(path) }

    func testTheFileIsReadAgainWhenItChanges() throws {
        let file = SubordinateIDFile(path: path)
        file.readAgain()
        XCTAssertEqual(file.current, SubordinateIDs(), "no file: no ranges")
        try write("1:100000:65536\n")
        XCTAssertEqual(file.lastRead, SubordinateIDs(), "the handoff loop's look-up reads nothing")
        eventually("read again, on a thread of its own") { file.current.owner(of: 100_000) == 1 }
        try write("22:100000:65536\n")
        eventually("changed: read again") { file.current.owner(of: 100_000) == 22 }
        unlink(path)
        eventually("gone: no ranges") { file.current == SubordinateIDs() }
    }

    func testAnOwnerNoAccountIsFoundForIsLeftOutAndAReadThatFailsKeepsTheLast() throws {
        let file = SubordinateIDFile(path: path)
        try write("1:100000:65536\nno-such-account-here:200000:65536\n")
        file.readAgain()
        XCTAssertEqual(file.lastRead.ranges, [.init(owner: 1, first: 100_000, count: 65_536)])
        // Over the largest file read: kept what was read before.
        try write(String(repeating: "#", count: SubordinateIDFile.largest + 1))
        file.readAgain()
        XCTAssertEqual(file.lastRead.owner(of: 100_000), 1)
    }

    private func write(_ text: String) throws {
        // In place, as an editor that keeps the inode would: only the size or change time tells.
        let handle = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(handle, 0)
        defer { close(handle) }
        let bytes = Array(text.utf8)
        XCTAssertEqual(bytes.withUnsafeBytes { Glibc.write(handle, $0.baseAddress, $0.count) }, bytes.count)
    }
}
