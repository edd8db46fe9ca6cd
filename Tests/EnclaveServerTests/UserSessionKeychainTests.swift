import EnclaveCore
import EnclaveProtocol
import Foundation
import GRDB
import Logging
import XCTest

@testable import EnclaveServer

/// The keychain's rules where a call waits — an add for its shared commit (`GroupCommit`), a
/// protected read or update for its proofs on the connection — and the user's other requests run
/// meanwhile.
final class UserSessionKeychainTests: XCTestCase {
    private var directory: String!
    private var daemon: EnclaveDaemon!
    private let clock = ManualClock()
    private static let app = AppIdentity(name: "/usr/bin/example-app", kind: .app)

    override func setUp() async throws {
        directory = NSTemporaryDirectory() + "user-session-keychain-\(UUID().uuidString)"
        daemon = try EnclaveDaemon(
            config: .inProcess(directory, passcodeCost: 10),
            clock: clock,
            logger: Logger(label: "test")
        )
    }

    override func tearDown() async throws {
        daemon = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func add(_ account: String, protection: Protection, on session: UserSession) async -> KeychainReply {
        let request = KeychainRequest(
            attributes: ["class": .string("genp"), "acct": .string(account), "v_Data": .data(Data("secret".utf8))],
            accessControl: AccessControlValue(protection: protection, flags: []),
            context: "c"
        )
        return await answered(session.keychainStart(.add, request, app: app))
    }

    private static func answered(
        _ start: KeychainStart,
        file: StaticString = #filePath,
        line: UInt = #line
    ) -> KeychainReply {
        guard case .answered(let reply) = start else {
            XCTFail("asked for proofs", file: file, line: line)
            return KeychainReply(status: .param, message: "asked for proofs")
        }
        return reply
    }

    private static func pending(
        _ start: KeychainStart,
        file: StaticString = #filePath,
        line: UInt = #line
    ) throws -> PendingKeychain {
        guard case .proving(let pending) = start else {
            XCTFail("answered without proofs: \(start)", file: file, line: line)
            throw CancellationError()
        }
        return pending
    }

    private static func item(
        _ account: String,
        _ flags: AccessControlFlags,
        data: Data? = Data("secret".utf8)
    ) -> KeychainRequest {
        var attributes: [String: KeychainValue] = ["class": .string("genp"), "acct": .string(account)]
        if let data { attributes["v_Data"] = .data(data) }
        return KeychainRequest(
            attributes: attributes,
            accessControl: AccessControlValue(protection: .whenUnlocked, flags: flags),
            context: "c"
        )
    }

    private static func read(_ account: String) -> KeychainRequest {
        var request = KeychainRequest(attributes: ["class": .string("genp"), "acct": .string(account)], context: "c")
        request.returnData = true
        return request
    }

    /// The steps the proofs of `pending` ask for, proven in turn as the connection would.
    private static func proveAll(
        _ pending: PendingKeychain
    ) -> (steps: [EvaluationStep], accepted: [StoredItem], waited: Bool) {
        var proofs = pending.proofs
        var steps: [EvaluationStep] = []
        var next = proofs.next()
        while case .prove(let step) = next {
            steps.append(step)
            next = proofs.stepEnded(.success(.biometric))
        }
        guard case .finished(let accepted, let waited) = next else { return (steps, [], false) }
        return (steps, accepted, waited)
    }

    private func enrolledSession() async throws -> UserSession {
        let session = try daemon.session(for: getuid())
        try await session.setPasscode(current: nil, new: "1234")
        try await session.enroll(passcode: "1234", name: "right-index")
        return session
    }

    private func passcodeBoundItems() throws -> Int {
        try daemon.storage.pool.read { db in
            try Int.fetchOne(
                db,
                sql: "SELECT COUNT(*) FROM item WHERE protection = ?",
                arguments: [Protection.whenPasscodeSetThisDeviceOnly.rawValue]
            ) ?? -1
        }
    }

    /// Attack (a race): an app adds a passcode-bound item and, while the add waits for its commit,
    /// the passcode is removed — which deletes such items and their class key. Before the guard the
    /// add then committed: an item no key opens, outliving the passcode it needed.
    func testAPasscodeBoundAddWaitingForItsCommitDoesNotOutliveThePasscode() async throws {
        let session = try daemon.session(for: getuid())
        try await session.setPasscode(current: nil, new: "1234")
        let release = daemon.storage.itemWrites.hold()
        let adding = Task {
            await UserSessionKeychainTests.add("bound", protection: .whenPasscodeSetThisDeviceOnly, on: session)
        }
        let deadline = Date().addingTimeInterval(10)
        while daemon.storage.itemWrites.waitingWrites == 0 && Date() < deadline {
            try await Task.sleep(nanoseconds: 1_000_000)
        }
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
        let adds = (0..<6).map { i in
            Task { await UserSessionKeychainTests.add(i == 5 ? "a0" : "a\(i)", protection: .whenUnlocked, on: session) }
        }
        let deadline = Date().addingTimeInterval(10)
        while daemon.storage.itemWrites.waitingWrites < 6 && Date() < deadline {
            try await Task.sleep(nanoseconds: 1_000_000)
        }
        XCTAssertEqual(daemon.storage.itemWrites.waitingWrites, 6)
        let before = daemon.storage.itemWrites.commits
        release()
        var statuses: [KeychainStatus] = []
        for a in adds { statuses.append(await a.value.status) }
        XCTAssertEqual(statuses.filter { $0 == .success }.count, 5)
        XCTAssertEqual(statuses.filter { $0 == .duplicateItem }.count, 1, "\(statuses)")
        XCTAssertEqual(daemon.storage.itemWrites.commits - before, 1, "the six waited together and shared one commit")
    }

    /// A read of an item with no access control is answered by the session alone: nobody is asked.
    func testAnUnprotectedReadNeedsNoProof() async throws {
        let session = try await enrolledSession()
        let outcome1 = Self.answered(await session.keychainStart(.add, Self.item("plain", []), app: Self.app)).status
        XCTAssertEqual(outcome1, .success)
        let reply = Self.answered(await session.keychainStart(.copy, Self.read("plain"), app: Self.app))
        XCTAssertEqual(reply.items.first?.data, Data("secret".utf8))
    }

    /// A protected read names its steps; the connection proves them; the session opens.
    func testAProtectedReadIsProvenThenOpened() async throws {
        let session = try await enrolledSession()
        let outcome2 = Self.answered(
            await session.keychainStart(.add, Self.item("guarded", [.biometryAny, .devicePasscode]), app: Self.app)
        ).status
        XCTAssertEqual(outcome2, .success)
        let pending = try Self.pending(await session.keychainStart(.copy, Self.read("guarded"), app: Self.app))
        let (steps, accepted, waited) = Self.proveAll(pending)
        XCTAssertEqual(steps, [.biometric, .passcode])
        XCTAssertTrue(waited)
        let reply = await session.keychainFinish(pending, accepted: accepted, waited: waited)
        XCTAssertEqual(reply.status, .success, "\(reply)")
        XCTAssertEqual(reply.items.first?.data, Data("secret".utf8))
    }

    /// The enrolment changes while the prompt is open (another request of the user runs): a
    /// `biometryCurrentSet` item proven before the change is not opened after it.
    func testAnEnrolmentChangeWhileThePromptIsOpenInvalidates() async throws {
        let session = try await enrolledSession()
        let outcome3 = Self.answered(
            await session.keychainStart(.add, Self.item("current", .biometryCurrentSet), app: Self.app)
        ).status
        XCTAssertEqual(outcome3, .success)
        let pending = try Self.pending(await session.keychainStart(.copy, Self.read("current"), app: Self.app))
        let (steps, accepted, waited) = Self.proveAll(pending)
        XCTAssertEqual(steps, [.biometric])
        try await session.enroll(passcode: "1234", name: "left-index")
        let reply = await session.keychainFinish(pending, accepted: accepted, waited: waited)
        XCTAssertEqual(reply.status, .invalidItemRef, "\(reply)")
        // And a new read is refused before anyone is asked.
        let outcome4 = Self.answered(await session.keychainStart(.copy, Self.read("current"), app: Self.app)).status
        XCTAssertEqual(outcome4, .invalidItemRef)
    }

    /// An item changed by another request while this one's prompt was open is not answered or
    /// overwritten from what was read before it.
    func testAnItemChangedWhileThePromptIsOpenIsReadAgain() async throws {
        let session = try await enrolledSession()
        let outcome5 = Self.answered(
            await session.keychainStart(.add, Self.item("moving", .biometryAny), app: Self.app)
        ).status
        XCTAssertEqual(outcome5, .success)
        let reading = try Self.pending(await session.keychainStart(.copy, Self.read("moving"), app: Self.app))
        var update = KeychainRequest(attributes: ["class": .string("genp"), "acct": .string("moving")], context: "c")
        update.changes = ["labl": .string("first")]
        let updating = try Self.pending(await session.keychainStart(.update, update, app: Self.app))
        // A third request changes the item meanwhile (an unprotected change: the item is made plain).
        var other = update
        other.changes = ["labl": .string("other")]
        other.changesAccessControl = AccessControlValue(protection: .whenUnlocked, flags: [])
        clock.advance(1)
        let changedFirst = try Self.pending(await session.keychainStart(.update, other, app: Self.app))
        let (_, changedAccepted, _) = Self.proveAll(changedFirst)
        let outcome6 = await session.keychainFinish(changedFirst, accepted: changedAccepted, waited: true).status
        XCTAssertEqual(outcome6, .success)

        let (_, readAccepted, readProved) = Self.proveAll(reading)
        let outcome7 = await session.keychainFinish(reading, accepted: readAccepted, waited: readProved).status
        XCTAssertEqual(outcome7, .itemNotFound)
        let (_, updateAccepted, updateProved) = Self.proveAll(updating)
        let outcome8 = await session.keychainFinish(updating, accepted: updateAccepted, waited: updateProved).status
        XCTAssertEqual(outcome8, .itemNotFound)
        // The change made meanwhile stands, and the item now opens without anyone asked.
        var labelled = Self.read("moving")
        labelled.returnAttributes = true
        let now = Self.answered(await session.keychainStart(.copy, labelled, app: Self.app))
        XCTAssertEqual(now.items.first?.attributes["labl"], .string("other"))
    }

    /// An update that asks nobody reads and writes without another request of the user between:
    /// many at once all succeed, and one of their values stays.
    func testUpdatesThatAskNobodyAllSucceed() async throws {
        let session = try daemon.session(for: getuid())
        let outcome9 = Self.answered(await session.keychainStart(.add, Self.item("busy", []), app: Self.app)).status
        XCTAssertEqual(outcome9, .success)
        let updates = (0..<16).map { i in
            Task {
                var update = KeychainRequest(
                    attributes: ["class": .string("genp"), "acct": .string("busy")],
                    context: "c"
                )
                update.changes = ["labl": .string("v\(i)")]
                return UserSessionKeychainTests.answered(
                    await session.keychainStart(.update, update, app: UserSessionKeychainTests.app)
                ).status
            }
        }
        for u in updates {
            let status = await u.value
            XCTAssertEqual(status, .success)
        }
    }

    /// An update of several items is one change: when one of them cannot be written, none is.
    /// Here the second match would take the first's new primary attributes. Before, the first was
    /// already renamed when the second failed, so the call answered `duplicateItem` and changed the
    /// keychain anyway (Apple's keychain runs an update in one transaction).
    func testAnUpdateOfSeveralItemsThatFailsOnOneChangesNone() async throws {
        let session = try daemon.session(for: getuid())
        for account in ["first", "second"] {
            let request = KeychainRequest(
                attributes: [
                    "class": .string("genp"), "svce": .string("shared"), "acct": .string(account),
                    "v_Data": .data(Data(account.utf8)),
                ],
                context: "c"
            )
            let status = Self.answered(await session.keychainStart(.add, request, app: Self.app)).status
            XCTAssertEqual(status, .success)
        }
        var update = KeychainRequest(attributes: ["class": .string("genp"), "svce": .string("shared")], context: "c")
        update.changes = ["acct": .string("same")]
        let updated = Self.answered(await session.keychainStart(.update, update, app: Self.app))
        XCTAssertEqual(updated.status, .duplicateItem, updated.message ?? "")
        for account in ["first", "second"] {
            let reply = Self.answered(await session.keychainStart(.copy, Self.read(account), app: Self.app))
            XCTAssertEqual(reply.status, .success, "\(account) was changed by an update that failed")
            XCTAssertEqual(reply.items.first?.data, Data(account.utf8))
        }
        let renamed = Self.answered(await session.keychainStart(.copy, Self.read("same"), app: Self.app))
        XCTAssertEqual(renamed.status, .itemNotFound, "no item took the new account")
    }

    /// All matches, and the passcode is removed while the prompt for one of them is open: a
    /// passcode-bound match read before is left out (it can no longer be used), the proven one is
    /// answered — not the whole call refused.
    func testAllMatchesLeaveOutWhatThePromptOutlived() async throws {
        let session = try await enrolledSession()
        var bound = Self.item("bound", [])
        bound.accessControl = AccessControlValue(protection: .whenPasscodeSetThisDeviceOnly, flags: [])
        var added = Self.answered(await session.keychainStart(.add, bound, app: Self.app))
        XCTAssertEqual(added.status, .success)
        added = Self.answered(await session.keychainStart(.add, Self.item("guarded", .userPresence), app: Self.app))
        XCTAssertEqual(added.status, .success)
        var all = KeychainRequest(attributes: ["class": .string("genp")], context: "c")
        all.returnData = true
        all.returnAttributes = true
        all.matchAll = true
        let pending = try Self.pending(await session.keychainStart(.copy, all, app: Self.app))
        let (steps, accepted, waited) = Self.proveAll(pending)
        XCTAssertEqual(steps, [.owner])
        XCTAssertEqual(accepted.count, 2)
        try await session.removePasscode(current: "1234")
        let reply = await session.keychainFinish(pending, accepted: accepted, waited: waited)
        XCTAssertEqual(reply.status, .success, "\(reply)")
        XCTAssertEqual(reply.items.map { $0.attributes["acct"] }, [.string("guarded")])
    }

    /// An update that gives an item a new protection is checked against the user's state after the
    /// prompt: one needing an enrolled finger is refused once the last finger was removed meanwhile.
    func testANewProtectionIsCheckedAgainstTheStateAfterThePrompt() async throws {
        let session = try await enrolledSession()
        let added = Self.answered(await session.keychainStart(.add, Self.item("moving", .biometryAny), app: Self.app))
        XCTAssertEqual(added.status, .success)
        var update = KeychainRequest(attributes: ["class": .string("genp"), "acct": .string("moving")], context: "c")
        update.changes = [:]
        update.changesAccessControl = AccessControlValue(protection: .whenUnlocked, flags: .biometryCurrentSet)
        let pending = try Self.pending(await session.keychainStart(.update, update, app: Self.app))
        let (_, accepted, waited) = Self.proveAll(pending)
        try await session.unenroll(passcode: "1234", name: "right-index")
        let reply = await session.keychainFinish(pending, accepted: accepted, waited: waited)
        XCTAssertEqual(reply.status, .authFailed, "\(reply)")
        XCTAssertEqual(reply.message, CreationProblem.enrolmentNeeded.description)
    }

    /// Attack: an item readable with a current finger or the passcode; its prompt is open and
    /// proven by a finger while a new finger is enrolled. Before, the read was answered — the
    /// finger may have been the new one, which `biometryCurrentSet` never accepts. Now it is
    /// refused (the item itself stays readable with the passcode).
    func testAFingerProvenWhileTheEnrolmentChangedDoesNotOpenACurrentSetItem() async throws {
        let session = try await enrolledSession()
        let added = Self.answered(
            await session.keychainStart(
                .add,
                Self.item("either", [.biometryCurrentSet, .or, .devicePasscode]),
                app: Self.app
            )
        )
        XCTAssertEqual(added.status, .success)
        let pending = try Self.pending(await session.keychainStart(.copy, Self.read("either"), app: Self.app))
        let (steps, accepted, waited) = Self.proveAll(pending)
        XCTAssertEqual(steps, [.owner])
        try await session.enroll(passcode: "1234", name: "new-finger")
        let reply = await session.keychainFinish(pending, accepted: accepted, waited: waited)
        XCTAssertEqual(reply.status, .authFailed, "\(reply)")
        XCTAssertTrue(reply.items.isEmpty)
        // Asked again, it needs the passcode alone.
        let again = try Self.pending(await session.keychainStart(.copy, Self.read("either"), app: Self.app))
        XCTAssertEqual(Self.proveAll(again).steps, [.passcode])
    }
}
