import EnclaveProtocol
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

/// The passcode never enters the app's process: an app cannot answer its own prompt with a
/// passcode it learned, because no request carries one (the daemon reads the person's keys from
/// the terminal it was handed, `TrustedTerminalPromptTests`).
final class TrustedPromptAttackTests: XCTestCase {
    /// Before the trusted prompt, the app drew the prompt itself and sent `promptInput(passcode)`:
    /// an app that knew the passcode authenticated with no person there (this test passed the
    /// evaluation against that daemon).
    func testAnAppCannotTypeThePasscodeIntoItsOwnPrompt() throws {
        let enclave = try TestEnclave()
        let client = try RawClient(path: enclave.socketPath)
        defer { client.close() }
        client.sendRequest(id: 1, op: "hello", args: ["version": enclaveProtocolVersion])
        XCTAssertEqual(kind(try client.readReply()), "hello")
        let options: [String: Any] = [
            "reason": "Unlock", "reuseDuration": 0, "interactionNotAllowed": false, "onTerminal": false,
        ]
        client.sendRequest(id: 2, op: "evaluate", args: ["context": "c", "policy": 2, "options": options])
        XCTAssertEqual(kind(try client.readReply(timeout: 30)), "prompt")
        client.sendRequest(id: 3, op: "promptInput", args: ["context": "c", "action": "passcode", "passcode": "1234"])
        var answers: [UInt64: [String: Any]] = [:]
        for _ in 0..<10 {
            // After the answer to the passcode, a second to see whether the evaluation ends too.
            guard let reply = try? client.readReply(timeout: answers[3] == nil ? 10 : 1), let id = number(reply["id"])
            else { break }
            if let r = reply["reply"] as? [String: Any], r["kind"] as? String != "prompt" { answers[UInt64(id)] = r }
            if answers[2] != nil { break }
        }
        XCTAssertEqual(answers[3]?["kind"] as? String, "failure", "\(answers)")
        XCTAssertEqual((answers[3]?["value"] as? [String: Any])?["code"] as? String, "unknownOperation")
        XCTAssertNil(answers[2], "the evaluation is still waiting for the person: \(answers)")
        client.sendRequest(id: 4, op: "invalidate", args: ["context": "c"])
        var final: [String: Any]?
        for _ in 0..<10 {
            guard let reply = try client.readReply(timeout: 10) else { break }
            if number(reply["id"]) == 2, kind(reply) == "evaluated" {
                final = reply["reply"] as? [String: Any]
                break
            }
        }
        let value = final?["value"] as? [String: Any]
        XCTAssertEqual(value?["success"] as? Bool, false, "\(String(describing: final))")
        XCTAssertEqual(value?["error"] as? Int, LAErrorCode.appCancel.rawValue)
    }

    /// Before the trusted prompt, the passcode string in a request opened the user's whole
    /// administration to any app that had learned it: every app's items listed, a shared group
    /// joined, every app's audit read, the passcode removed. Now the daemon asks the person (on the
    /// handed terminal, or a pipe a script hands) and reads nothing from the request.
    func testAPasscodeInARequestOpensNoAdministration() throws {
        let enclave = try TestEnclave()
        let client = try RawClient(path: enclave.socketPath)
        defer { client.close() }
        client.sendRequest(id: 1, op: "hello", args: ["version": enclaveProtocolVersion])
        XCTAssertEqual(kind(try client.readReply()), "hello")
        let attempts: [(String, [String: Any])] = [
            ("keychainList", ["passcode": "1234"]),
            ("configureAccessGroup", ["passcode": "1234", "name": "everything", "apps": ["/usr/bin/spy"]]),
            ("audit", ["limit": 50, "passcode": "1234", "everyApp": true]),
            ("removePasscode", ["current": "1234"]),
            // a valid name: the refusal is the person's rule, not the name's
            ("enroll", ["passcode": "1234", "name": "spy finger"]),
        ]
        for (i, (op, args)) in attempts.enumerated() {
            client.sendRequest(id: UInt64(10 + i), op: op, args: args)
            let reply = try client.readReply(timeout: 15)?["reply"] as? [String: Any]
            XCTAssertEqual(reply?["kind"] as? String, "failure", "\(op): \(String(describing: reply))")
            XCTAssertEqual((reply?["value"] as? [String: Any])?["code"] as? String, "notPermitted", "\(op)")
        }
        let status = try enclave.status()
        XCTAssertTrue(status.passcodeSet)
        XCTAssertEqual(try enclave.enrolments(), ["right-index-finger"])
    }

    private func kind(_ reply: [String: Any]?) -> String? { (reply?["reply"] as? [String: Any])?["kind"] as? String }
}
