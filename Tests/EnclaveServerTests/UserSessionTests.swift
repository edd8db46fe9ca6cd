import Crypto
import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import XCTest

@testable import EnclaveServer

/// One user's state owner, driven directly: what it keeps off its own executor.
final class UserSessionTests: XCTestCase {
    private var directory: String!
    private var daemon: EnclaveDaemon!

    override func setUp() async throws {
        directory = NSTemporaryDirectory() + "user-session-\(UUID().uuidString)"
        // scrypt at 2^14 (16 MiB): long enough that a request arriving during a check would plainly
        // wait behind it if the check ran on the user's actor.
        daemon = try EnclaveDaemon(
            config: .inProcess(directory, passcodeCost: 14),
            clock: ManualClock(),
            logger: Logger(label: "test")
        )
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
        } catch let error as DaemonError {
            XCTAssertEqual(error.code, .busy)
        }
        let (correct, _) = try await first.value
        XCTAssertTrue(correct)
    }

    /// New passcodes need the configured length (6 by default); the status says whether the one
    /// set has it.
    func testNewPasscodesNeedTheMinimumLength() async throws {
        daemon = nil
        daemon = try EnclaveDaemon(
            config: .inProcess(directory, passcodeMinimumLength: PasscodeVerifier.minimumLength),
            clock: ManualClock(),
            logger: Logger(label: "test")
        )
        let session = try daemon.session(for: getuid())
        do {
            try await session.setPasscode(current: nil, new: "12345")
            XCTFail("5 characters are fewer than 6")
        } catch let error as DaemonError {
            XCTAssertEqual(error.code, .invalidParameter)
            XCTAssertTrue(error.message.contains("at least 6"), error.message)
        }
        try await session.setPasscode(current: nil, new: "123456")
        let status = try await session.status(app: "/usr/bin/example-app")
        XCTAssertEqual(status.passcodeMinimumLength, 6)
        XCTAssertEqual(status.passcodeShorterThanMinimum, false)
    }

    /// A verifier made at a lower cost (or under a shorter rule) keeps working, is remade at today's
    /// cost on its next success — durably — and is never touched by a wrong entry.
    func testAWeakerVerifierIsRemadeOnItsNextSuccess() async throws {
        let old = try daemon.session(for: getuid())
        try await old.setPasscode(current: nil, new: "1234")
        let stored = await old.record.passcode
        let before = try XCTUnwrap(stored)
        XCTAssertEqual(before.cost, 14)
        daemon = nil

        daemon = try EnclaveDaemon(
            config: .inProcess(directory, passcodeCost: 15, passcodeMinimumLength: 6),
            clock: ManualClock(),
            logger: Logger(label: "test")
        )
        let session = try daemon.session(for: getuid())
        let shorter = try await session.status(app: "/usr/bin/example-app").passcodeShorterThanMinimum
        XCTAssertEqual(shorter, true, "known from when it was set")
        let (wrong, _) = try await session.checkPasscode("9999")
        XCTAssertFalse(wrong)
        let unchanged = await session.record.passcode
        XCTAssertEqual(unchanged, before, "a wrong entry changes nothing")
        let (right, _) = try await session.checkPasscode("1234")
        XCTAssertTrue(right, "the shorter passcode keeps working")
        try await session.persist()
        let upgraded = await session.record.passcode
        let after = try XCTUnwrap(upgraded)
        XCTAssertEqual(after.cost, 15)
        XCTAssertNotEqual(after.salt, before.salt)
        XCTAssertTrue(after.isKeyed)
        XCTAssertNil(after.length, "the length is sealed, not in the clear")
        XCTAssertEqual(after.length(key: KeyHierarchy.passcodeKey(master: daemon.masterKey, uid: getuid())), 4)
        daemon = nil

        daemon = try EnclaveDaemon(
            config: .inProcess(directory, passcodeCost: 15, passcodeMinimumLength: 6),
            clock: ManualClock(),
            logger: Logger(label: "test")
        )
        let reopened = try daemon.session(for: getuid())
        let durable = await reopened.record.passcode?.cost
        XCTAssertEqual(durable, 15, "the upgrade is durable")
        let again = try await reopened.checkPasscode("1234").correct
        XCTAssertTrue(again)
        let stillShorter = try await reopened.status(app: "/usr/bin/example-app").passcodeShorterThanMinimum
        XCTAssertEqual(stillShorter, true)
    }

    /// A verifier from before keying (scrypt's output as stored, its length in the clear: a copy of
    /// the state could test guesses offline) keeps working and is remade keyed on its next success.
    func testAnUnkeyedVerifierIsRemadeKeyedOnItsNextSuccess() async throws {
        var record = UserRecord(uid: getuid(), domainSecret: DomainStateHash.newSecret())
        record.passcode = try PasscodeVerifier.make(passcode: "1234", cost: 14, minimumLength: 4)
        try daemon.storage.save(record)
        let session = try daemon.session(for: getuid())
        let loaded = await session.record.passcode
        XCTAssertEqual(loaded?.isKeyed, false)
        XCTAssertEqual(loaded?.length, 4)
        let (right, _) = try await session.checkPasscode("1234")
        XCTAssertTrue(right)
        try await session.persist()
        let remade = await session.record.passcode
        let after = try XCTUnwrap(remade)
        XCTAssertTrue(after.isKeyed)
        XCTAssertNil(after.length)
        let key = KeyHierarchy.passcodeKey(master: daemon.masterKey, uid: getuid())
        XCTAssertTrue(after.matches(try after.derive("1234", key: key)))
        XCTAssertFalse(after.matches(try after.derive("1235", key: key)))
        XCTAssertThrowsError(try after.derive("1234"), "without its key nothing is tested")
        XCTAssertEqual(after.length(key: key), 4)
    }

    /// PAM and fprintd know users by name: root by its, a uid without an account by its number;
    /// many threads at once each get their own answer (`getpwuid_r`).
    func testAccountNames() async {
        XCTAssertEqual(accountName(uid: 0), "root")
        XCTAssertEqual(accountName(uid: 4_000_000_123), "4000000123")
        let names = await withTaskGroup(of: String.self) { group in
            for i in 0..<64 { group.addTask { accountName(uid: i % 2 == 0 ? 0 : 4_000_000_123) } }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        XCTAssertEqual(Set(names), ["root", "4000000123"])
        XCTAssertEqual(names.filter { $0 == "root" }.count, 32)
    }
}
