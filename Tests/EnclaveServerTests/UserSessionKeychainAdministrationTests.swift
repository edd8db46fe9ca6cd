import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import XCTest

@testable import EnclaveServer

/// The person's view of every app's items (`lactl keychain`): listed and removed by reference,
/// behind the passcode.
final class UserSessionKeychainAdministrationTests: XCTestCase {
    private var directory: String!
    private var daemon: EnclaveDaemon!

    override func setUp() async throws {
        directory = NSTemporaryDirectory() + "user-session-keychain-admin-\(UUID().uuidString)"
        daemon = try EnclaveDaemon(
            config: .inProcess(directory, passcodeCost: 10),
            clock: ManualClock(),
            logger: Logger(label: "test")
        )
    }

    override func tearDown() async throws {
        daemon = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func add(_ account: String, app: String, on session: UserSession) async throws {
        let request = KeychainRequest(
            attributes: ["class": .string("genp"), "acct": .string(account), "v_Data": .data(Data("s".utf8))],
            context: "c"
        )
        guard
            case .answered(let reply) = await session.keychainStart(
                .add,
                request,
                app: AppIdentity(name: app, kind: .app)
            )
        else { return XCTFail("an add asked for proofs") }
        XCTAssertEqual(reply.status, .success, reply.message ?? "")
    }

    /// Every app's items are listed; one is removed by its reference and the others stay; a
    /// reference that names nothing, or a wrong passcode, removes nothing.
    func testAnItemIsRemovedByItsReferenceAndNothingElse() async throws {
        let session = try daemon.session(for: getuid())
        try await session.setPasscode(current: nil, new: "1234")
        try await add("first", app: "/usr/bin/one", on: session)
        try await add("second", app: "/usr/bin/two", on: session)
        let listed = try await session.keychainList(passcode: "1234")
        XCTAssertEqual(Set(listed.map(\.account)), ["first", "second"])
        XCTAssertEqual(Set(listed.map(\.app)), ["/usr/bin/one", "/usr/bin/two"])
        let first = try XCTUnwrap(listed.first { $0.account == "first" })

        do {
            try await session.keychainRemove(passcode: "9999", persistentRef: first.persistentRef)
            XCTFail("a wrong passcode removed an item")
        } catch {}
        do {
            try await session.keychainRemove(passcode: "1234", persistentRef: Data("no such item".utf8))
            XCTFail("a reference that names nothing was accepted")
        } catch let error as DaemonError {
            XCTAssertEqual(error.code, .notFound)
        }
        let unchanged = try await session.keychainList(passcode: "1234")
        XCTAssertEqual(unchanged.count, 2, "nothing removed yet")

        try await session.keychainRemove(passcode: "1234", persistentRef: first.persistentRef)
        let left = try await session.keychainList(passcode: "1234")
        XCTAssertEqual(left.map(\.account), ["second"])
    }
}
