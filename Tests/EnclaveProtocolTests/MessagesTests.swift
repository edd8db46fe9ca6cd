import EnclaveProtocol
import Foundation
import XCTest

final class MessagesTests: XCTestCase {
    private func decode(_ json: String) throws -> RequestEnvelope { try RequestEnvelope.decode(Array(json.utf8)) }

    private func assertDecodingError(_ json: String, _ kind: RequestDecodingError.Kind, id: UInt64?,
                                     file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try decode(json), file: file, line: line) { error in
            guard let e = error as? RequestDecodingError else { return XCTFail("unexpected \(error)", file: file, line: line) }
            XCTAssertEqual(e.kind, kind, e.detail, file: file, line: line)
            XCTAssertEqual(e.id, id, file: file, line: line)
            XCTAssertFalse(e.detail.isEmpty, file: file, line: line)
        }
    }

    // MARK: Requests

    static let everyRequest: [Request] = [
        .hello(version: 1),
        .canEvaluate(context: "ctx-1", policy: 1),
        .evaluate(context: "ctx-2", policy: 2, options: EvaluationOptions(reason: "Unlock", cancelTitle: "Not Now",
                                                                         fallbackTitle: "", reuseDuration: 30.5,
                                                                         interactionNotAllowed: true, onTerminal: true)),
        .evaluate(context: "ctx-3", policy: 99, options: EvaluationOptions(reason: "Unlock")),
        .handoff(kind: .terminal),
        .invalidate(context: "ctx-1"),
        .domainState(context: "ctx-1"),
        .domainState(context: nil),
        .status,
        .setPasscode,
        .changePasscode,
        .removePasscode,
        .enroll(name: "right thumb"),
        .unenroll(name: "right thumb"),
        .simulate(events: [.match, .nomatch, .cancel, .fallback, .retry, .passcode("9876")]),
        .simulate(events: []),
        .clearSimulated,
        .audit(limit: 10, everyApp: false),
        .keychainAdd(KeychainRequest(attributes: ["class": .string("genp"), "acct": .string("alice"), "v_Data": .data(Data([1, 2]))],
                                     accessControl: AccessControlValue(protection: .whenPasscodeSetThisDeviceOnly, flags: .biometryCurrentSet), context: "c1", reason: "r")),
        .keychainCopy(KeychainRequest(attributes: ["class": .string("inet"), "port": .int(443), "sync": .bool(false),
                                                   "cdat": .date(Date(timeIntervalSince1970: 1_800_000_000))],
                                      context: "c2", authenticationUI: .skip, returnData: true, returnAttributes: true, matchAll: true)),
        .keychainUpdate(KeychainRequest(attributes: ["class": .string("genp")], changes: ["v_Data": .data(Data())], context: "c3")),
        .keychainDelete(KeychainRequest(attributes: ["class": .string("genp")], context: "c4")),
        .keychainList,
        .authorizeAccessControl(context: "ac", flags: [.biometryAny, .and, .devicePasscode], options: .init(reason: "Open")),
        .configureAccessGroup(name: "team", apps: ["/usr/bin/a", "/usr/bin/b"]),
        .accessGroups,
        .enrolments,
        .key(KeyRequest(operation: .sign, kind: .signing, blob: Data([1]), digest: Data(repeating: 7, count: 32), context: "k", reason: "sign")),
        .keychainRemove(persistentRef: Data([9, 9])),
        .audit(limit: 10, everyApp: true),
        .handoff(kind: .secretInput),
        .resetPasscodeLockout(uid: nil),
        .resetPasscodeLockout(uid: 1000),
        .remoteLock(uid: nil),
        .remoteLock(uid: 0),
        .servePrompts,
        .promptAction(prompt: 1, action: PromptAction(.shown)),
        .promptAction(prompt: 7, action: .typed("9876")),
        .promptAction(prompt: UInt64.max, action: PromptAction(.simulatedNoMatch)),
    ]

    func testEveryRequestRoundTrips() throws {
        for (i, request) in Self.everyRequest.enumerated() {
            let envelope = RequestEnvelope(id: UInt64(i) + 1, request: request)
            XCTAssertEqual(try RequestEnvelope.decode(envelope.encoded()), envelope, "\(request)")
        }
    }

    func testEveryOperationIsCoveredAndKnown() {
        let covered = Set(Self.everyRequest.map(\.operation.rawValue))
        XCTAssertEqual(covered, Request.operations)
        XCTAssertEqual(Request.operations.count, 30, "16 of issue 2 + 6 keychain operations + key + 2 access-group operations + authorizeAccessControl + changePasscode (promptInput became handoff) + enrolments + the prompt agent's two")
    }

    /// The agent's answers: every kind travels; one the protocol does not know is bad arguments;
    /// the passcode is never in an answer's description (logs).
    func testPromptActionsTravelAndHideThePasscode() throws {
        for kind in PromptAction.Kind.allCases {
            let envelope = RequestEnvelope(id: 5, request: .promptAction(prompt: 2, action: PromptAction(kind, passcode: kind == .passcode ? "4321" : nil)))
            XCTAssertEqual(try RequestEnvelope.decode(envelope.encoded()), envelope)
        }
        assertDecodingError(#"{"id": 6, "op": "promptAction", "args": {"prompt": 1, "action": {"kind": "approve"}}}"#, .invalidArguments, id: 6)
        assertDecodingError(#"{"id": 7, "op": "promptAction", "args": {"action": {"kind": "cancel"}}}"#, .invalidArguments, id: 7)
        XCTAssertFalse("\(PromptAction.typed("4321"))".contains("4321"))
        XCTAssertFalse("\(Request.promptAction(prompt: 1, action: .typed("4321")))".contains("4321"))
    }

    func testLargeIdRoundTrips() throws {
        let envelope = RequestEnvelope(id: UInt64.max, request: .status)
        XCTAssertEqual(try RequestEnvelope.decode(envelope.encoded()).id, UInt64.max)
    }

    func testEncodedShapeIsIdOpArgs() throws {
        let bytes = RequestEnvelope(id: 42, request: .canEvaluate(context: "c", policy: 2)).encoded()
        let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        XCTAssertEqual(object?["id"] as? Int, 42)
        XCTAssertEqual(object?["op"] as? String, "canEvaluate")
        let args = object?["args"] as? [String: Any]
        XCTAssertEqual(args?["context"] as? String, "c")
        XCTAssertEqual(args?["policy"] as? Int, 2)
    }

    func testHandWrittenRequestDecodes() throws {
        XCTAssertEqual(try decode(#"{"id":3,"op":"canEvaluate","args":{"context":"abc","policy":1}}"#),
                       RequestEnvelope(id: 3, request: .canEvaluate(context: "abc", policy: 1)))
        XCTAssertEqual(try decode(#"{"id":4,"op":"audit","args":{}}"#), RequestEnvelope(id: 4, request: .audit(limit: 50, everyApp: false)),
                       "audit's limit defaults to 50")
    }

    func testUnknownOperationCarriesId() {
        assertDecodingError(#"{"id":7,"op":"frobnicate","args":{}}"#, .unknownOperation, id: 7)
        assertDecodingError(#"{"id":8,"op":"","args":{}}"#, .unknownOperation, id: 8)
        assertDecodingError(#"{"id":9,"op":"Status","args":{}}"#, .unknownOperation, id: 9)
        // No request carries the person's keys (the daemon reads them from the handed terminal).
        assertDecodingError(#"{"id":10,"op":"promptInput","args":{"context":"c","action":"passcode","passcode":"1234"}}"#, .unknownOperation, id: 10)
    }

    func testMissingArgumentsAreInvalidArgumentsWithId() {
        assertDecodingError(#"{"id":11,"op":"canEvaluate","args":{"context":"c"}}"#, .invalidArguments, id: 11)
        assertDecodingError(#"{"id":12,"op":"hello","args":{}}"#, .invalidArguments, id: 12)
        assertDecodingError(#"{"id":13,"op":"evaluate","args":{"context":"c","policy":1}}"#, .invalidArguments, id: 13)
        assertDecodingError(#"{"id":14,"op":"enroll","args":{"passcode":"1234"}}"#, .invalidArguments, id: 14)
        assertDecodingError(#"{"id":15,"op":"setPasscode","args":"1234"}"#, .invalidArguments, id: 15)
        assertDecodingError(#"{"id":16,"op":"handoff","args":{}}"#, .invalidArguments, id: 16)
        assertDecodingError(#"{"id":17,"op":"simulate","args":{}}"#, .invalidArguments, id: 17)
        assertDecodingError(#"{"id":18,"op":"removePasscode","args":[]}"#, .invalidArguments, id: 18)
        // A passcode in a request is never read: administration asks the person (or a handed pipe).
        XCTAssertEqual(try decode(#"{"id":19,"op":"removePasscode","args":{"current":"1234"}}"#), RequestEnvelope(id: 19, request: .removePasscode))
    }

    func testIllTypedArgumentsAreInvalidArgumentsWithId() {
        assertDecodingError(#"{"id":21,"op":"canEvaluate","args":{"context":"c","policy":"one"}}"#, .invalidArguments, id: 21)
        assertDecodingError(#"{"id":22,"op":"hello","args":{"version":1.5}}"#, .invalidArguments, id: 22)
        assertDecodingError(#"{"id":23,"op":"handoff","args":{"kind":"dance"}}"#, .invalidArguments, id: 23)
        assertDecodingError(#"{"id":24,"op":"remoteLock","args":{"uid":-1}}"#, .invalidArguments, id: 24)
        assertDecodingError(#"{"id":25,"op":"simulate","args":{"events":[{"kind":"wave"}]}}"#, .invalidArguments, id: 25)
        assertDecodingError(#"{"id":26,"op":"evaluate","args":{"context":"c","policy":1,"options":{"reason":5}}}"#, .invalidArguments, id: 26)
        assertDecodingError(#"{"id":27,"op":"status","args":[]}"#, .invalidArguments, id: 27)
    }

    func testNonJSONIsMalformedWithoutId() {
        assertDecodingError("this is not json", .malformed, id: nil)
        assertDecodingError("", .malformed, id: nil)
        assertDecodingError(#"{"id":5,"op":"status","#, .malformed, id: nil)
        XCTAssertThrowsError(try RequestEnvelope.decode([0xff, 0xfe, 0x00])) { error in
            XCTAssertEqual((error as? RequestDecodingError)?.kind, .malformed)
            XCTAssertNil((error as? RequestDecodingError)?.id)
        }
    }

    func testUnreadableHeaderIsMalformedWithoutId() {
        assertDecodingError(#"[1,2,3]"#, .malformed, id: nil)
        assertDecodingError(#"{"op":"status","args":{}}"#, .malformed, id: nil)
        assertDecodingError(#"{"id":"5","op":"status","args":{}}"#, .malformed, id: nil)
        assertDecodingError(#"{"id":-5,"op":"status","args":{}}"#, .malformed, id: nil)
        assertDecodingError(#"{"id":5,"op":7,"args":{}}"#, .malformed, id: nil)
    }

    // MARK: Replies

    static let everyReply: [Reply] = [
        .hello(HelloReply(version: 1, mode: .system, uid: 1000, app: "/usr/bin/app")),
        .ok,
        .canEvaluate(CanEvaluateReply(biometryType: .touchID, error: nil, message: nil, domainState: Data([1, 2, 3]))),
        .canEvaluate(CanEvaluateReply(biometryType: .none, error: .biometryNotAvailable, message: "no sensor", domainState: nil)),
        .prompt(PromptScreen(app: "/usr/bin/app", reason: "Unlock", instruction: "Touch ID: place your finger on the sensor",
                             cancelTitle: "Cancel", fallbackTitle: "Enter Password", passcodeEntry: true, retryOffered: false,
                             sensorArmed: true, sensorName: "Touch ID", sensorSimulated: true, passcodeRetryAfter: 42.5,
                             passcodeDisabled: false)),
        .prompt(PromptScreen(app: "a", reason: "r", instruction: "i", cancelTitle: "c", fallbackTitle: nil, passcodeEntry: false,
                             retryOffered: true, sensorArmed: false, sensorName: nil, sensorSimulated: false,
                             passcodeRetryAfter: nil, passcodeDisabled: true)),
        .evaluated(EvaluationResult(success: true, error: nil, message: nil, biometryType: .faceID, domainState: Data([9]))),
        .evaluated(EvaluationResult(success: false, error: .notInteractive, message: "User interaction is required.",
                                    biometryType: .opticID, domainState: nil)),
        .domainState(DomainStateReply(biometryType: .touchID, stateHash: Data(repeating: 0xEE, count: 32))),
        .domainState(DomainStateReply(biometryType: .none, stateHash: nil)),
        .enrolments(["right thumb", "left thumb"]),
        .status(UserStatus(uid: 1000, mode: .user, app: "/usr/bin/app",
                           sensor: SensorInfo(kind: .touchID, name: "Simulated Touch ID", simulated: true),
                           enrolledCount: 2, passcodeSet: true, biometricFailures: 2,
                           biometryLockout: "failures", passcodeFailures: 5, passcodeRetryAfter: 59,
                           passcodeDisabled: false, queuedEvents: 3, domainState: Data([4, 5]), simulationEnabled: true)),
        .status(UserStatus(uid: 0, mode: .system, app: "x", sensor: nil, enrolledCount: 0, passcodeSet: false, biometricFailures: 0,
                           biometryLockout: nil, passcodeFailures: 0, passcodeRetryAfter: nil, passcodeDisabled: true,
                           queuedEvents: 0, domainState: nil, simulationEnabled: false)),
        .audit([AuditEntry(time: Date(timeIntervalSince1970: 1_800_000_123), uid: 1000, pid: 4242, app: "/usr/bin/app",
                           operation: "evaluate", policy: 2, result: "success"),
                AuditEntry(time: Date(timeIntervalSince1970: 1_800_000_124.5), uid: 1000, pid: 4243, app: "/usr/bin/app",
                           operation: "status", policy: nil, result: "ok")]),
        .audit([]),
        .handoffTicket(Data(repeating: 0xA5, count: 16)),
        .failure(Failure(.passcodeRetryLater, "try again later", retryAfter: 60)),
        .failure(Failure(.unknownOperation, "unknown operation \"x\"")),
        .agentEvent(AgentEvent(prompt: 0, serving: "uid 1000, session 2")),
        .agentEvent(.show(3, PromptScreen(app: "/usr/bin/app", reason: "Unlock", instruction: "Enter the device passcode", cancelTitle: "Cancel",
                                          fallbackTitle: nil, passcodeEntry: true, retryOffered: false, sensorArmed: false, sensorName: nil,
                                          sensorSimulated: false, passcodeRetryAfter: nil, passcodeDisabled: false))),
        .agentEvent(.close(3, result: "authenticated")),
    ]

    func testEveryReplyRoundTrips() throws {
        for (i, reply) in Self.everyReply.enumerated() {
            let envelope = ReplyEnvelope(id: UInt64(i) * 1000, reply: reply)
            XCTAssertEqual(try ReplyEnvelope.decode(envelope.encoded()), envelope, "\(reply)")
        }
    }

    func testEveryFailureCodeRoundTrips() throws {
        let codes: [FailureCode] = [.malformedMessage, .unknownOperation, .invalidParameter, .unsupportedVersion, .outOfOrder,
                                    .notPermitted, .passcodeIncorrect, .passcodeNotSet, .passcodeAlreadySet, .passcodeRetryLater,
                                    .passcodeDisabled, .notFound, .alreadyExists, .simulationDisabled, .noSensor, .busy, .internalError]
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
        let bytes = ReplyEnvelope(id: 1, reply: .evaluated(EvaluationResult(success: false, error: .biometryLockout, message: nil,
                                                                            biometryType: .touchID, domainState: nil))).encoded()
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
