import EnclaveProtocol
import Foundation
import XCTest

/// Each request's own checks: what no daemon state could make right is `invalidParameter`,
/// decided from the arguments alone, before any work.
final class RequestArgumentsTests: XCTestCase {
    private let long = String(repeating: "x", count: WireLimits.maxTextBytes + 1)
    private let options = EvaluationOptions(reason: "Unlock")

    private func keychain(
        context: String = "c",
        reason: String? = nil,
        password: Data? = nil,
        attributes: Int = 1,
        changes: Int? = nil
    ) -> KeychainRequest {
        func many(_ n: Int) -> [String: KeychainValue] {
            Dictionary(uniqueKeysWithValues: (0..<n).map { ("a\($0)", KeychainValue.int(Int64($0))) })
        }
        return KeychainRequest(
            attributes: many(attributes),
            changes: changes.map(many),
            context: context,
            reason: reason,
            applicationPassword: password
        )
    }

    func testEachRequestRefusesWhatItsArgumentsCannotBe() {
        var reuseForever = options
        reuseForever.reuseDuration = .infinity
        var negativeReuse = options
        negativeReuse.reuseDuration = -1
        var emptyReason = options
        emptyReason.reason = ""
        var longTitle = options
        longTitle.cancelTitle = long
        let rows: [(Request, refused: String?)] = [
            (.canEvaluate(.init(context: "a", policy: 1)), nil),
            (.canEvaluate(.init(context: "", policy: 1)), "a context id has 1 to 64 bytes"),
            (
                .canEvaluate(.init(context: String(repeating: "c", count: 65), policy: 1)),
                "a context id has 1 to 64 bytes"
            ),
            (.canEvaluate(.init(context: "a", policy: 99)), "99 is not an LAPolicy value"),
            (.evaluate(.init(context: "a", policy: 2, options: options)), nil),
            (.evaluate(.init(context: "a", policy: 0, options: options)), "0 is not an LAPolicy value"),
            (.evaluate(.init(context: "a", policy: 2, options: emptyReason)), "localizedReason must not be empty"),
            (
                .evaluate(.init(context: "a", policy: 2, options: longTitle)),
                "localizedCancelTitle is longer than \(WireLimits.maxTextBytes) bytes"
            ),
            (
                .evaluate(.init(context: "a", policy: 2, options: reuseForever)),
                "touchIDAuthenticationAllowableReuseDuration must be a finite number ≥ 0"
            ),
            (
                .evaluate(.init(context: "a", policy: 2, options: negativeReuse)),
                "touchIDAuthenticationAllowableReuseDuration must be a finite number ≥ 0"
            ),
            (.authorizeAccessControl(.init(context: "a", flags: .biometryAny, options: options)), nil),
            (
                .authorizeAccessControl(.init(context: "", flags: .biometryAny, options: options)),
                "a context id has 1 to 64 bytes"
            ),
            (
                .authorizeAccessControl(.init(context: "a", flags: .biometryAny, options: emptyReason)),
                "localizedReason must not be empty"
            ),
            // The same options as evaluatePolicy's, checked the same way (before, only the reason was).
            (
                .authorizeAccessControl(.init(context: "a", flags: .biometryAny, options: longTitle)),
                "localizedCancelTitle is longer than \(WireLimits.maxTextBytes) bytes"
            ),
            (.invalidate(.init(context: "a")), nil),
            (.invalidate(.init(context: "")), "a context id has 1 to 64 bytes"),
            (.enroll(.init(name: "right thumb")), nil),
            (.enroll(.init(name: "")), "an identity name has 1 to 64 letters, digits, spaces, '-', '_' or '.'"),
            (
                .enroll(.init(name: "thumb\u{1b}[2J")),
                "an identity name has 1 to 64 letters, digits, spaces, '-', '_' or '.'"
            ),
            (.unenroll(.init(name: "never enrolled, any text")), nil),
            (.keychainCopy(keychain()), nil),
            (.keychainCopy(keychain(context: "")), "a context id has 1 to 64 bytes"),
            (
                .keychainAdd(keychain(reason: long)),
                "kSecUseOperationPrompt is longer than \(WireLimits.maxTextBytes) bytes"
            ),
            (
                .keychainAdd(keychain(password: Data(repeating: 0x61, count: WireLimits.maxPasscodeBytes + 1))),
                "application password is longer than \(WireLimits.maxPasscodeBytes) bytes"
            ),
            (.keychainAdd(keychain(attributes: 64)), nil),
            (.keychainAdd(keychain(attributes: 65)), "at most 64 attributes"),
            (.keychainUpdate(keychain(changes: 65)), "at most 64 attributes"),
            (.key(KeyRequest(operation: .sign, kind: .signing, context: "k")), nil),
            (.key(KeyRequest(operation: .sign, kind: .signing, context: "")), "a context id has 1 to 64 bytes"),
            (
                .key(KeyRequest(operation: .sign, kind: .signing, context: "k", reason: long)),
                "localizedReason is longer than \(WireLimits.maxTextBytes) bytes"
            ),
            (.status, nil),
            (.hello(.init(version: 12345)), nil),
            (.pamAuthenticate(.init(user: "alice", service: "sudo", reuse: 300)), nil),
            (.pamAuthenticate(.init(user: "", service: "sudo")), "a PAM user name has 1 to 32 bytes"),
            (
                .pamAuthenticate(.init(user: String(repeating: "u", count: 33), service: "sudo")),
                "a PAM user name has 1 to 32 bytes"
            ),
            (
                .pamAuthenticate(.init(user: "alice", service: "../sudo")),
                "a PAM service is a name of 1 to 64 bytes without \"/\""
            ),
            (
                .pamAuthenticate(.init(user: "alice", service: "sudo", tty: String(repeating: "t", count: 257))),
                "PAM_TTY and PAM_RHOST have at most 256 bytes"
            ),
            (.pamAuthenticate(.init(user: "alice", service: "sudo", reuse: 301)), "reuse is 0 to 300 seconds"),
            (.pamAuthenticate(.init(user: "alice", service: "sudo", reuse: .nan)), "reuse is 0 to 300 seconds"),
        ]
        for (request, refused) in rows {
            do {
                try request.validate()
                XCTAssertNil(refused, "\(request.operation) was accepted")
            } catch {
                XCTAssertEqual(error, Failure(.invalidParameter, refused ?? "(accepted)"), "\(request.operation)")
            }
        }
    }

    func testEveryOperationNamesItselfOnceAndItsArgumentsTravelUnderArgs() throws {
        var seen = Set<Request.Operation>()
        for request in RequestTests.everyRequest {
            seen.insert(request.operation)
            let json = try XCTUnwrap(
                JSONSerialization.jsonObject(with: Data(RequestEnvelope(id: 1, request: request).encoded()))
                    as? [String: Any]
            )
            XCTAssertEqual(json["op"] as? String, request.operation.rawValue)
            XCTAssertNotNil(
                json["args"] as? [String: Any],
                "\(request.operation): args is an object, empty when there are none"
            )
        }
        XCTAssertEqual(seen, Set(Request.Operation.allCases), "the sample covers every operation")
    }
}
