import EnclaveProtocol
import Foundation
import XCTest

/// The wire's replies.
final class ReplyTests: XCTestCase {
    // MARK: Replies

    static let everyReply: [Reply] = [
        .hello(HelloReply(version: 1, mode: .system, uid: 1000, app: "/usr/bin/app")),
        .ok,
        .canEvaluate(CanEvaluateReply(biometryType: .touchID, error: nil, message: nil, domainState: Data([1, 2, 3]))),
        .canEvaluate(
            CanEvaluateReply(biometryType: .none, error: .biometryNotAvailable, message: "no sensor", domainState: nil)
        ),
        .prompt(
            PromptScreen(
                app: "/usr/bin/app",
                reason: "Unlock",
                instruction: "Touch ID: place your finger on the sensor",
                cancelTitle: "Cancel",
                fallbackTitle: "Enter Password",
                passcodeEntry: true,
                retryOffered: false,
                sensorArmed: true,
                sensorName: "Touch ID",
                sensorSimulated: true,
                passcodeRetryAfter: 42.5,
                passcodeDisabled: false
            )
        ),
        .prompt(
            PromptScreen(
                app: "a",
                reason: "r",
                instruction: "i",
                cancelTitle: "c",
                fallbackTitle: nil,
                passcodeEntry: false,
                retryOffered: true,
                sensorArmed: false,
                sensorName: nil,
                sensorSimulated: false,
                passcodeRetryAfter: nil,
                passcodeDisabled: true
            )
        ),
        .evaluated(
            EvaluationResult(success: true, error: nil, message: nil, biometryType: .faceID, domainState: Data([9]))
        ),
        .evaluated(
            EvaluationResult(
                success: false,
                error: .notInteractive,
                message: "User interaction is required.",
                biometryType: .opticID,
                domainState: nil
            )
        ),
        .domainState(DomainStateReply(biometryType: .touchID, stateHash: Data(repeating: 0xEE, count: 32))),
        .domainState(DomainStateReply(biometryType: .none, stateHash: nil)),
        .enrolments(["right thumb", "left thumb"]),
        .status(
            UserStatus(
                uid: 1000,
                mode: .user,
                app: "/usr/bin/app",
                sensor: SensorInfo(kind: .touchID, name: "Simulated Touch ID", simulated: true),
                enrolledCount: 2,
                passcodeSet: true,
                biometricFailures: 2,
                biometryLockout: "failures",
                passcodeFailures: 5,
                passcodeRetryAfter: 59,
                passcodeDisabled: false,
                queuedEvents: 3,
                domainState: Data([4, 5]),
                simulationEnabled: true
            )
        ),
        .status(
            UserStatus(
                uid: 0,
                mode: .system,
                app: "x",
                sensor: nil,
                enrolledCount: 0,
                passcodeSet: false,
                biometricFailures: 0,
                biometryLockout: nil,
                passcodeFailures: 0,
                passcodeRetryAfter: nil,
                passcodeDisabled: true,
                queuedEvents: 0,
                domainState: nil,
                simulationEnabled: false
            )
        ),
        .audit([
            AuditEntry(
                time: Date(timeIntervalSince1970: 1_800_000_123),
                uid: 1000,
                pid: 4242,
                app: "/usr/bin/app",
                operation: "evaluate",
                policy: 2,
                result: "success"
            ),
            AuditEntry(
                time: Date(timeIntervalSince1970: 1_800_000_124.5),
                uid: 1000,
                pid: 4243,
                app: "/usr/bin/app",
                operation: "status",
                policy: nil,
                result: "ok"
            ),
        ]),
        .audit([]),
        .handoffTicket(Data(repeating: 0xA5, count: 16)),
        .failure(Failure(.passcodeRetryLater, "try again later", retryAfter: 60)),
        .failure(Failure(.unknownOperation, "unknown operation \"x\"")),
        .agentEvent(AgentEvent(prompt: 0, serving: "uid 1000, session 2")),
        .agentEvent(
            .show(
                3,
                PromptScreen(
                    app: "/usr/bin/app",
                    reason: "Unlock",
                    instruction: "Enter the device passcode",
                    cancelTitle: "Cancel",
                    fallbackTitle: nil,
                    passcodeEntry: true,
                    retryOffered: false,
                    sensorArmed: false,
                    sensorName: nil,
                    sensorSimulated: false,
                    passcodeRetryAfter: nil,
                    passcodeDisabled: false
                )
            )
        ),
        .agentEvent(.close(3, result: "authenticated")),
        .pamAuthenticated(PAMAuthenticationReply(outcome: .locked, message: "password entry is delayed")),
    ]

    func testEveryReplyRoundTrips() throws {
        for (i, reply) in Self.everyReply.enumerated() {
            let envelope = ReplyEnvelope(id: UInt64(i) * 1000, reply: reply)
            XCTAssertEqual(try ReplyEnvelope.decode(envelope.encoded()), envelope, "\(reply)")
        }
    }

    /// The coding a daemon chose travels under its JSON name; a daemon from before names none.
    func testHelloNamesTheCodingUnderItsJSONName() throws {
        let chosen = ReplyEnvelope(
            id: 1,
            reply: .hello(HelloReply(version: 1, mode: .user, uid: 1000, app: "/a", encoding: "binary2"))
        )
        XCTAssertTrue(String(decoding: chosen.encoded(), as: UTF8.self).contains(#""encoding":"binary2""#))
        let old = Array(
            #"{"id":1,"reply":{"kind":"hello","value":{"version":1,"mode":"user","uid":1000,"app":"/a"}}}"#.utf8
        )
        guard case .hello(let hello) = try ReplyEnvelope.decode(old).reply else { return XCTFail("a hello") }
        XCTAssertEqual(hello.wireEncoding, .json)
    }

    func testEveryFailureCodeRoundTrips() throws {
        let codes: [FailureCode] = [
            .malformedMessage, .unknownOperation, .invalidParameter, .unsupportedVersion, .outOfOrder,
            .notPermitted, .passcodeIncorrect, .passcodeNotSet, .passcodeAlreadySet, .passcodeRetryLater,
            .passcodeDisabled, .notFound, .alreadyExists, .simulationDisabled, .noSensor, .busy, .internalError,
        ]
        for code in codes {
            let envelope = ReplyEnvelope(id: 1, reply: .failure(Failure(code, "m")))
            XCTAssertEqual(try ReplyEnvelope.decode(envelope.encoded()), envelope)
        }
    }

    func testOnlyScreensAreNotFinal() {
        for reply in Self.everyReply {
            switch reply {
            case .prompt, .agentEvent: XCTAssertFalse(reply.isFinal, "\(reply)")
            default: XCTAssertTrue(reply.isFinal, "\(reply)")
            }
        }
    }

    func testLAErrorCodesTravelAsAppleRawValues() throws {
        let bytes = ReplyEnvelope(
            id: 1,
            reply: .evaluated(
                EvaluationResult(
                    success: false,
                    error: .biometryLockout,
                    message: nil,
                    biometryType: .touchID,
                    domainState: nil
                )
            )
        ).encoded()
        let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        let value = (object?["reply"] as? [String: Any])?["value"] as? [String: Any]
        XCTAssertEqual(value?["error"] as? Int, -8)
        XCTAssertEqual(value?["biometryType"] as? Int, 1)
    }

    func testUnknownReplyKindIsRejected() {
        XCTAssertThrowsError(try ReplyEnvelope.decode(Array(#"{"id":1,"reply":{"kind":"surprise"}}"#.utf8)))
        XCTAssertThrowsError(try ReplyEnvelope.decode(Array("not json".utf8)))
    }
}
