import EnclaveCore
import Foundation
import XCTest

@testable import EnclaveServer

#if canImport(Glibc)
import Glibc
#endif

/// The holders of a pseudo-terminal's master, read from the real /proc.
final class PtyMasterHoldersTests: XCTestCase {
    func testTheProcessThatOpenedTheMasterIsItsHolder() throws {
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(master, 0)
        defer { close(master) }
        var index: UInt32 = 0
        // TIOCGPTN (_IOR('T', 0x30, unsigned int)), which Glibc's module does not export.
        XCTAssertEqual(ioctl(master, 0x8004_5430, &index), 0)
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let holders = try XCTUnwrap(PtyMasterHolders.scan(index: index))
        XCTAssertTrue(
            holders.contains(.init(pid: getpid(), executable: me, file: PeerProcess.fileID(AT_FDCWD, me))),
            "\(holders)"
        )
        let other = try XCTUnwrap(PtyMasterHolders.scan(index: index + 1000))
        XCTAssertFalse(other.contains { $0.pid == getpid() }, "another index's master is not this one")
    }

    /// A scan that runs out of its budget says nothing (the terminal is refused) rather than a
    /// partial list, whose missing holder might be the app.
    func testAScanOutOfTimeSaysNothing() {
        XCTAssertNil(PtyMasterHolders.scan(index: 0, budget: .zero))
    }
}
