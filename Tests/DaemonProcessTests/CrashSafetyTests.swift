import EnclaveClient
import EnclaveProtocol
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Counters are durable before the answer leaves the daemon: SIGKILL at random instants never
/// loses a failed attempt the client has been told about, and never lowers a counter.
final class CrashSafetyTests: XCTestCase {
    func testSIGKILLBetweenAFailedAttemptAndItsReplyNeverLosesTheAttempt() throws {
        let enclave = try TestEnclave()
        var generator = SystemRandomNumberGenerator()
        var told = 0
        var untold = 0
        for round in 0..<30 {
            let before = try enclave.status()
            if before.biometricFailures >= 3 || before.passcodeFailures >= 3 {
                // Keep clear of lockout and delays: a correct passcode resets both counters.
                try enclave.setPasscode("1234", current: "1234")
            }
            let start = try enclave.status()
            let biometric = round % 2 == 0
            let connection = try EnclaveConnection(socketPath: enclave.socketPath)
            let seen = FailureWitness()
            let policy = biometric ? PolicyValue.deviceOwnerAuthenticationWithBiometrics : .deviceOwnerAuthentication
            connection.send(
                .evaluate(
                    .init(context: "crash-\(round)", policy: policy.rawValue, options: .init(reason: "crash test"))
                ),
                onEvent: { reply in
                    if case .prompt(let screen) = reply,
                        screen.instruction.contains("no match") || screen.instruction.contains("Wrong passcode")
                    {
                        seen.mark()
                    }
                },
                completion: { _ in }
            )
            try enclave.queue(biometric ? [.nomatch] : [.passcode("0000\(round)")])
            usleep(UInt32.random(in: 0...4000, using: &generator))
            enclave.kill()
            let wasTold = seen.value
            connection.close()
            try enclave.start()
            let after = try enclave.status()
            let (b0, b1) =
                biometric
                ? (start.biometricFailures, after.biometricFailures) : (start.passcodeFailures, after.passcodeFailures)
            XCTAssertGreaterThanOrEqual(b1, b0, "round \(round): a counter went down")
            XCTAssertLessThanOrEqual(b1, b0 + 1, "round \(round)")
            if wasTold {
                told += 1
                XCTAssertEqual(b1, b0 + 1, "round \(round): the client saw the failure but it was not persisted")
            } else {
                untold += 1
            }
        }
        print("SIGKILL rounds: \(told) killed after the client saw the failure, \(untold) before")
    }

    /// Keychain writes and deletes under SIGKILL at random instants: every add the client was told
    /// succeeded is there after the restart, whole; every delete it was told succeeded stays
    /// deleted; whatever is there is whole (never a half-written item).
    func testSIGKILLDuringKeychainWritesAndDeletesLosesNothingAnsweredAndResurrectsNothing() throws {
        let enclave = try TestEnclave()
        var generator = SystemRandomNumberGenerator()
        var added: Set<String> = []  // answered success, not deleted since
        var deleted: Set<String> = []  // answered success
        func attributes(_ account: String) -> [String: KeychainValue] {
            ["class": .string("genp"), "svce": .string("crash"), "acct": .string(account)]
        }
        func secret(_ account: String) -> Data { Data((account + String(repeating: "-payload", count: 16)).utf8) }
        for round in 0..<25 {
            let connection = try EnclaveConnection(socketPath: enclave.socketPath)
            let answers = AnswerLog()
            // This round's adds, and deletes of what earlier rounds added, all in flight at once.
            // As many deletes as adds: the set stays small enough for one answer (64 KiB).
            let toDelete = Array(added.prefix(12))
            for i in 0..<12 {
                let account = "r\(round)-\(i)"
                var add = attributes(account)
                add["v_Data"] = .data(secret(account))
                connection.send(.keychainAdd(KeychainRequest(attributes: add, context: "w"))) { result in
                    if case .success(.keychain(let r)) = result, r.status == .success { answers.record(added: account) }
                }
                if i < toDelete.count {
                    let victim = toDelete[i]
                    connection.send(.keychainDelete(KeychainRequest(attributes: attributes(victim), context: "w"))) {
                        result in
                        if case .success(.keychain(let r)) = result, r.status == .success {
                            answers.record(deleted: victim)
                        }
                    }
                }
            }
            usleep(UInt32.random(in: 0...20_000, using: &generator))
            enclave.kill()
            let (newlyAdded, newlyDeleted) = answers.snapshot
            connection.close()
            added.formUnion(newlyAdded)
            added.subtract(newlyDeleted)
            deleted.formUnion(newlyDeleted)
            try enclave.start()

            let control = try EnclaveConnection(socketPath: enclave.socketPath)
            defer { control.close() }
            let reply = try control.request(
                .keychainCopy(
                    KeychainRequest(
                        attributes: ["class": .string("genp"), "svce": .string("crash")],
                        context: "check",
                        returnData: true,
                        returnAttributes: true,
                        matchAll: true
                    )
                )
            )
            guard case .keychain(let all) = reply else { return XCTFail("round \(round): \(reply)") }
            var present: [String: Data] = [:]
            for item in all.items {
                if case .string(let account)? = item.attributes["acct"] { present[account] = item.data }
            }
            // A delete sent but not answered before the kill may have happened or not.
            let uncertain = Set(toDelete).subtracting(newlyDeleted)
            for account in uncertain where present[account] == nil {
                added.remove(account)
                deleted.insert(account)
            }
            for account in added where !uncertain.contains(account) {
                XCTAssertEqual(present[account], secret(account), "round \(round): \(account) was answered added")
            }
            for account in deleted {
                XCTAssertNil(present[account], "round \(round): \(account) was answered deleted, and came back")
            }
            for (account, data) in present {
                XCTAssertEqual(data, secret(account), "round \(round): \(account) is not whole")
            }
            // What was written but not answered before the kill is there whole, or not at all; from
            // now on it counts as added (it may be deleted in a later round).
            added.formUnion(present.keys.filter { !deleted.contains($0) })
        }
        print(
            "keychain SIGKILL rounds: \(added.count) items added and kept, \(deleted.count) deleted, checked after every kill"
        )
    }
}

private final class AnswerLog: @unchecked Sendable {
    private let lock = NSLock()
    private var added: Set<String> = []
    private var deleted: Set<String> = []
    func record(added account: String) { lock.withLock { _ = added.insert(account) } }
    func record(deleted account: String) { lock.withLock { _ = deleted.insert(account) } }
    var snapshot: (Set<String>, Set<String>) { lock.withLock { (added, deleted) } }
}
