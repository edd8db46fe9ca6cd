import EnclaveCore
import EnclaveProtocol
@testable import EnclaveServer
import Foundation
import GRDB
import Logging
import XCTest

/// The keychain's rules where an add waits for its shared commit (`GroupCommit`) and the user's
/// other requests run meanwhile.
final class UserSessionKeychainTests: XCTestCase {
    private var directory: String!
    private var daemon: EnclaveDaemon!
    private static let app = AppIdentity(name: "/usr/bin/example-app", kind: .app)

    override func setUp() async throws {
        directory = NSTemporaryDirectory() + "user-session-keychain-\(UUID().uuidString)"
        daemon = try EnclaveDaemon(config: .inProcess(directory, passcodeCost: 10), clock: ManualClock(), logger: Logger(label: "test"))
    }

    override func tearDown() async throws {
        daemon = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func add(_ account: String, protection: Protection, on session: UserSession) async -> KeychainReply {
        let request = KeychainRequest(attributes: ["class": .string("genp"), "acct": .string(account), "v_Data": .data(Data("secret".utf8))],
                                      accessControl: AccessControlValue(protection: protection, flags: []), context: "c")
        return await session.keychain(.add, request, app: app, authorize: { _, _, _ in .failure(.authenticationFailed, "no prompt here") })
    }

    private func passcodeBoundItems() throws -> Int {
        try daemon.storage.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item WHERE protection = ?", arguments: [Protection.whenPasscodeSetThisDeviceOnly.rawValue]) ?? -1
        }
    }

    /// Attack (a race): an app adds a passcode-bound item and, while the add waits for its commit,
    /// the passcode is removed — which deletes such items and their class key. Before the guard the
    /// add then committed: an item no key opens, outliving the passcode it needed.
    func testAPasscodeBoundAddWaitingForItsCommitDoesNotOutliveThePasscode() async throws {
        let session = try daemon.session(for: getuid())
        try await session.setPasscode(current: nil, new: "1234")
        let release = daemon.storage.itemWrites.hold()
        let adding = Task { await UserSessionKeychainTests.add("bound", protection: .whenPasscodeSetThisDeviceOnly, on: session) }
        let deadline = Date().addingTimeInterval(10)
        while daemon.storage.itemWrites.waitingWrites == 0 && Date() < deadline { try await Task.sleep(nanoseconds: 1_000_000) }
        XCTAssertEqual(daemon.storage.itemWrites.waitingWrites, 1, "the add waits for its commit")
        try await session.removePasscode(current: "1234")
        release()
        let reply = await adding.value
        XCTAssertEqual(reply.status, KeychainStatus.authFailed, "\(reply)")
        XCTAssertTrue(reply.message?.contains("needs a device passcode") ?? false, "\(reply)")
        XCTAssertEqual(try passcodeBoundItems(), 0, "no passcode-bound item outlives the passcode")

        // With a passcode again, passcode-bound items are made as before.
        try await session.setPasscode(current: nil, new: "5678")
        let after = await UserSessionKeychainTests.add("after", protection: .whenPasscodeSetThisDeviceOnly, on: session)
        XCTAssertEqual(after.status, .success, "\(after)")
        XCTAssertEqual(try passcodeBoundItems(), 1)
    }

    /// Adds of one user that arrive together are answered each as its own commit says, and an
    /// item that needs no passcode is untouched by the guard.
    func testAddsWaitingTogetherAreEachAnsweredByTheirOwnOutcome() async throws {
        let session = try daemon.session(for: getuid())
        let release = daemon.storage.itemWrites.hold()
        let adds = (0..<6).map { i in Task { await UserSessionKeychainTests.add(i == 5 ? "a0" : "a\(i)", protection: .whenUnlocked, on: session) } }
        let deadline = Date().addingTimeInterval(10)
        while daemon.storage.itemWrites.waitingWrites < 6 && Date() < deadline { try await Task.sleep(nanoseconds: 1_000_000) }
        XCTAssertEqual(daemon.storage.itemWrites.waitingWrites, 6)
        let before = daemon.storage.itemWrites.commits
        release()
        var statuses: [KeychainStatus] = []
        for a in adds { statuses.append(await a.value.status) }
        XCTAssertEqual(statuses.filter { $0 == .success }.count, 5)
        XCTAssertEqual(statuses.filter { $0 == .duplicateItem }.count, 1, "\(statuses)")
        XCTAssertEqual(daemon.storage.itemWrites.commits - before, 1, "the six waited together and shared one commit")
    }
}
