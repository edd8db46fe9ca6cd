import EnclaveClient
import EnclaveProtocol
import EnclaveServer
import Foundation
import GRDB
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import Security
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Counters that cannot go back (issue 31): someone with the disk keeps a copy of the state
/// directory, guesses until the delays start, stops the daemon, puts the copy back and starts it —
/// before, the copy's counters were taken (0 failures, the next guess checked at once: unlimited
/// guessing, five at a time). On a TPM root (swtpm here) the state is older than the TPM's counter:
/// passcode checks and biometrics are refused for every user until root's recovery, and status
/// says why. The same for one record put back into today's state, and for a deleted counter. A
/// daemon killed at any instant still starts in step.
final class RollbackCounterAttackTests: XCTestCase {
    private var tpm: SwtpmSimulator!
    private var enclave: TestEnclave!
    private var copy = ""

    override func setUpWithError() throws {
        guard SwtpmSimulator.available else { throw XCTSkip("needs swtpm (scripts/setup-debian installs it)") }
        tpm = try SwtpmSimulator()
        enclave = try TestEnclave.sealed(to: tpm)
        copy = enclave.directory + "/state-copy"
    }

    override func tearDown() {
        enclave?.stop()
        enclave = nil
        tpm?.destroy()
        tpm = nil
    }

    private func keepACopy() throws {
        enclave.stop()
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.copyItem(atPath: enclave.stateDirectory, toPath: copy)
        try enclave.start()
    }

    private func putTheCopyBack() throws {
        enclave.stop()
        try FileManager.default.removeItem(atPath: enclave.stateDirectory)
        try FileManager.default.copyItem(atPath: copy, toPath: enclave.stateDirectory)
        try enclave.start()
    }

    /// Five wrong guesses: the delay starts.
    private func guessFive() throws {
        for n in 0..<5 {
            XCTAssertThrowsError(try enclave.setPasscode("5678", current: "900\(n)"), "guess \(n)")
        }
        XCTAssertEqual(try enclave.status().passcodeFailures, 5)
        XCTAssertNotNil(try enclave.status().passcodeRetryAfter, "the delay runs")
    }

    private func biometricEvaluation() throws -> Int? {
        try enclave.queue(.match)
        return enclave.run {
            var error: NSError?
            _ = LAContext().canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)
            return error?.code
        }
    }

    /// Root's recovery, as the docs give it: the daemon stopped, `laenclaved --reanchor` on the
    /// same state, then started again.
    private func reanchor() throws {
        enclave.stop()
        let run = try enclave.runOnce(tpm: tpm, ["--reanchor"])
        XCTAssertEqual(run.status, 0, run.stderr)
        try enclave.start()
    }

    private func log() -> String { (try? String(contentsOfFile: enclave.logPath, encoding: .utf8)) ?? "" }

    func testAStateDirectoryPutBackIsRefusedNotReset() throws {
        try keepACopy()
        try guessFive()
        try putTheCopyBack()

        let status = try enclave.status()
        XCTAssertEqual(status.passcodeFailures, 0, "the copy's own counters")
        let refused = try XCTUnwrap(status.stateRefused, "a state put back was taken as it was")
        XCTAssertTrue(refused.contains("older than the TPM's rollback counter"), refused)
        XCTAssertThrowsError(try enclave.setPasscode("5678", current: "9005"), "a guess was checked") { error in
            XCTAssertTrue("\(error)".contains("older than"), "\(error)")
        }
        XCTAssertThrowsError(try enclave.setPasscode("5678", current: "1234"), "even the right passcode waits for root")
        XCTAssertEqual(try enclave.status().passcodeFailures, 0, "refused, not counted")
        XCTAssertEqual(try biometricEvaluation(), LAError.Code.biometryLockout.rawValue, "biometrics too")
        let lactl = try runProcess(productPath("lactl"), ["status", "--socket", enclave.socketPath])
        XCTAssertTrue(lactl.stdout.contains("REFUSED"), lactl.stdout)
        let doctor = try runProcess(productPath("lactl"), ["doctor", "--socket", enclave.socketPath])
        XCTAssertTrue(doctor.stdout.contains("--reanchor"), doctor.stdout)
        XCTAssertTrue(log().contains("older than"), log())
        // Writes while refused (a remote lock moves nothing) never reseal the copy into today's
        // state: a restart is refused the same.
        try enclave.remoteLock()
        enclave.stop()
        try enclave.start()
        XCTAssertNotNil(try enclave.status().stateRefused, "a restart took the copy")

        try reanchor()
        XCTAssertNil(try enclave.status().stateRefused)
        XCTAssertNoThrow(try enclave.setPasscode("5678", current: "1234"), "root accepted the state")
        // And the new anchor holds in turn: a copy of today's state put back after a guess is refused.
        try keepACopy()
        XCTAssertThrowsError(try enclave.setPasscode("9999", current: "0000"))
        try putTheCopyBack()
        XCTAssertNotNil(try enclave.status().stateRefused)
    }

    /// Attack: only the user's record from the copy, put into today's state (today's generation
    /// beside it), as someone who edits the database would.
    func testARecordPutBackFromACopyIsRefused() throws {
        try keepACopy()
        try guessFive()
        enclave.stop()
        let old = try DatabaseQueue(path: copy + "/enclave.sqlite")
        let row = try old.read { db in try Row.fetchOne(db, sql: "SELECT * FROM user") }
        let today = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite")
        try today.write { db in
            try db.execute(
                sql: "UPDATE user SET ledger = ? WHERE uid = ?",
                arguments: [row?["ledger"] as Data?, row?["uid"] as Int64?]
            )
        }
        try old.close()
        try today.close()
        try enclave.start()
        XCTAssertEqual(try enclave.status().passcodeFailures, 0, "the copy's ledger")
        let refused = try XCTUnwrap(try enclave.status().stateRefused, "a swapped record was taken")
        XCTAssertTrue(refused.contains("not the ones"), refused)
        XCTAssertThrowsError(try enclave.setPasscode("5678", current: "9005"))
        try enclave.remoteLock()
        enclave.stop()
        try enclave.start()
        XCTAssertNotNil(try enclave.status().stateRefused, "a write while refused resealed the swapped record")
    }

    /// Attack: the anchor removed, and every user's record with it, so the state would look new
    /// and take a passcode set anew — while its items stay.
    func testAnAnchorRemovedWithTheUsersIsRefused() throws {
        enclave.run {
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "bank.example",
                kSecAttrAccount as String: "alice", kSecValueData as String: Data("the secret".utf8),
            ]
            XCTAssertEqual(SecItemAdd(item as CFDictionary, nil), errSecSuccess)
        }
        enclave.stop()
        let queue = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite")
        try queue.write { db in
            try db.execute(sql: "DELETE FROM meta WHERE name = 'rollbackAnchor'")
            try db.execute(sql: "DELETE FROM user")
        }
        try queue.close()
        try enclave.start()
        let refused = try XCTUnwrap(try enclave.status().stateRefused, "a stripped state was taken as new")
        XCTAssertTrue(refused.contains("no rollback anchor"), refused)
    }

    /// Each passcode check moves the counter once, right or wrong, before it is checked (counted
    /// first): the state's generation, in step with the counter, says so.
    func testEachPasscodeCheckMovesTheCounterOnceBeforeItIsChecked() throws {
        let start = try generation()
        XCTAssertNoThrow(try enclave.enrolments(passcode: "1234"))
        XCTAssertEqual(try generation(), start + 1, "a right passcode")
        XCTAssertThrowsError(try enclave.enrolments(passcode: "9999"))
        XCTAssertEqual(try generation(), start + 2, "a wrong one")
        XCTAssertEqual(try enclave.status().passcodeFailures, 1)
        XCTAssertThrowsError(try enclave.enrolments(passcode: "9999"))
        XCTAssertEqual(try generation(), start + 2, "the same wrong one again: known, not counted, nothing moved")
        XCTAssertEqual(try enclave.status().passcodeFailures, 1)
        XCTAssertNoThrow(try enclave.enrolments(passcode: "1234"))
        XCTAssertEqual(try enclave.status().passcodeFailures, 0, "the count forgiven by the right one")
        XCTAssertEqual(try generation(), start + 3)
        enclave.stop()
        try enclave.start()
        XCTAssertNil(try enclave.status().stateRefused)
    }

    private func generation() throws -> UInt64 {
        let queue = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite")
        defer { try? queue.close() }
        let anchor = try queue.read { db in
            try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'rollbackAnchor'")
        }
        return try XCTUnwrap(
            (try JSONSerialization.jsonObject(with: XCTUnwrap(anchor)) as? [String: Any])?["generation"] as? UInt64
        )
    }

    /// Attack: the TPM's owner (an empty authorization on most machines) deletes the counter, so
    /// that nothing is left to compare with.
    func testADeletedCounterIsRefused() throws {
        enclave.stop()
        let anchor = try DatabaseQueue(path: enclave.stateDirectory + "/enclave.sqlite").read { db in
            try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'rollbackAnchor'")
        }
        let index = try XCTUnwrap(
            (try JSONSerialization.jsonObject(with: XCTUnwrap(anchor)) as? [String: Any])?["index"] as? UInt32
        )
        try TPMDevice.undefineCounter(index: index, tcti: tpm.tcti)
        try enclave.start()
        let refused = try XCTUnwrap(try enclave.status().stateRefused)
        XCTAssertTrue(refused.contains("gone"), refused)
        XCTAssertThrowsError(try enclave.setPasscode("5678", current: "1234"))
        try reanchor()
        XCTAssertNil(try enclave.status().stateRefused)
        XCTAssertNoThrow(try enclave.setPasscode("5678", current: "1234"))
    }

    /// SIGKILL at random instants around wrong guesses: the daemon always starts in step (a
    /// change made durable before the counter followed is finished at start), and a failure the
    /// client was told of is never lost.
    func testKilledAtAnyInstantTheStateStartsInStep() throws {
        var generator = SystemRandomNumberGenerator()
        var toldRounds = 0
        for round in 0..<16 {
            if try enclave.status().passcodeFailures >= 3 { try enclave.setPasscode("1234", current: "1234") }
            let before = try enclave.status().passcodeFailures
            let told = FailureWitness()
            let connection = try EnclaveConnection(socketPath: enclave.socketPath)
            connection.send(
                .evaluate(
                    .init(
                        context: "kill-\(round)",
                        policy: PolicyValue.deviceOwnerAuthentication.rawValue,
                        options: .init(reason: "kill test")
                    )
                ),
                onEvent: { reply in
                    if case .prompt(let screen) = reply, screen.instruction.contains("Wrong passcode") { told.mark() }
                },
                completion: { _ in }
            )
            try enclave.queue([.passcode("000\(round)")])
            usleep(UInt32.random(in: 0...150_000, using: &generator))
            enclave.kill()
            connection.close()
            do { try enclave.start() } catch {
                XCTFail("round \(round): the daemon did not start again: \(error)\n\(log())")
                throw error
            }
            let after = try enclave.status()
            XCTAssertNil(after.stateRefused, "round \(round): \(log())")
            if told.value {
                toldRounds += 1
                XCTAssertEqual(after.passcodeFailures, before + 1, "round \(round): a told failure lost")
            }
        }
        let finished = log().components(separatedBy: "a stop interrupted").count - 1
        print(
            "SIGKILL rounds on a TPM root: \(toldRounds) of 16 after the client saw the failure; \(finished) start(s) finished a move"
        )
    }
}
