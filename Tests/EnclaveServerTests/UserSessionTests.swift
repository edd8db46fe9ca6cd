import EnclaveCore
import EnclaveProtocol
@testable import EnclaveServer
import Foundation
import Logging
import XCTest

/// One user's state owner, driven directly: what it keeps off its own executor.
final class UserSessionTests: XCTestCase {
    private var directory: String!
    private var daemon: EnclaveDaemon!

    override func setUp() async throws {
        directory = NSTemporaryDirectory() + "user-session-\(UUID().uuidString)"
        // scrypt at 2^14 (16 MiB): long enough that a request arriving during a check would plainly
        // wait behind it if the check ran on the user's actor.
        daemon = try EnclaveDaemon(config: .inProcess(directory, passcodeCost: 14), clock: ManualClock(), logger: Logger(label: "test"))
    }

    override func tearDown() async throws {
        daemon = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Which of two concurrent calls finished first.
    actor FinishOrder {
        private(set) var names: [String] = []
        func finished(_ name: String) { names.append(name) }
    }

    func testAPasscodeCheckDoesNotHoldUpTheUsersOtherRequests() async throws {
        let session = try daemon.session(for: getuid())
        try await session.setPasscode(current: nil, new: "1234")
        let order = FinishOrder()
        let check = Task {
            _ = try? await session.checkPasscode("9999")
            await order.finished("passcode check")
        }
        // Let the check start its scrypt run, then ask for the status of the same user.
        try await Task.sleep(nanoseconds: 20_000_000)
        _ = try await session.status(app: "/usr/bin/example-app")
        await order.finished("status")
        await check.value
        let names = await order.names
        XCTAssertEqual(names, ["status", "passcode check"], "the status was answered while the passcode check ran")
    }

    func testOnePasscodeCheckAtATimePerUser() async throws {
        let session = try daemon.session(for: getuid())
        try await session.setPasscode(current: nil, new: "1234")
        let first = Task { try await session.checkPasscode("1234") }
        try await Task.sleep(nanoseconds: 20_000_000)
        do {
            _ = try await session.checkPasscode("5678")
            XCTFail("a second check while the first runs is refused")
        } catch let f as Failure {
            XCTAssertEqual(f.code, .busy)
        }
        let (correct, _) = try await first.value
        XCTAssertTrue(correct)
    }
}
