import EnclaveProtocol
import Foundation
import XCTest

/// The wire's requests: every operation round-trips, the shape is `{id, op, args}`, and what
/// cannot be read says why, with the id when there is one.
final class RequestTests: XCTestCase {
    private func decode(_ json: String) throws -> RequestEnvelope { try RequestEnvelope.decode(Array(json.utf8)) }

    private func assertDecodingError(
        _ json: String,
        _ code: WireError.Code,
        id: UInt64?,
        file: StaticString = #filePath,
        line: UInt = #line
    ) {
        XCTAssertThrowsError(try decode(json), file: file, line: line) { error in
            guard let e = error as? WireError else {
                return XCTFail("unexpected \(error)", file: file, line: line)
            }
            XCTAssertEqual(e.code, code, e.message, file: file, line: line)
            XCTAssertEqual(e.id, id, file: file, line: line)
            XCTAssertFalse(e.message.isEmpty, file: file, line: line)
        }
    }

    // MARK: Requests

    static let everyRequest: [Request] = [
        .hello(.init(version: 1)),
        .canEvaluate(.init(context: "ctx-1", policy: 1)),
        .evaluate(
            .init(
                context: "ctx-2",
                policy: 2,
                options: EvaluationOptions(
                    reason: "Unlock",
                    cancelTitle: "Not Now",
                    fallbackTitle: "",
                    reuseDuration: 30.5,
                    interactionNotAllowed: true,
                    onTerminal: true
                )
            )
        ),
        .evaluate(.init(context: "ctx-3", policy: 99, options: EvaluationOptions(reason: "Unlock"))),
        .handoff(.init(kind: .terminal)),
        .invalidate(.init(context: "ctx-1")),
        .domainState(.init(context: "ctx-1")),
        .domainState(.init(context: nil)),
        .status,
        .setPasscode,
        .changePasscode,
        .removePasscode,
        .enroll(.init(name: "right thumb")),
        .unenroll(.init(name: "right thumb")),
        .simulate(.init(events: [.match, .nomatch, .cancel, .fallback, .retry, .passcode("9876")])),
        .simulate(.init(events: [])),
        .clearSimulated,
        .audit(.init(limit: 10, everyApp: false)),
        .keychainAdd(
            KeychainRequest(
                attributes: ["class": .string("genp"), "acct": .string("alice"), "v_Data": .data(Data([1, 2]))],
                accessControl: AccessControlValue(
                    protection: .whenPasscodeSetThisDeviceOnly,
                    flags: .biometryCurrentSet
                ),
                context: "c1",
                reason: "r"
            )
        ),
        .keychainCopy(
            KeychainRequest(
                attributes: [
                    "class": .string("inet"), "port": .int(443), "sync": .bool(false),
                    "cdat": .date(Date(timeIntervalSince1970: 1_800_000_000)),
                ],
                context: "c2",
                authenticationUI: .skip,
                returnData: true,
                returnAttributes: true,
                matchAll: true
            )
        ),
        .keychainUpdate(
            KeychainRequest(attributes: ["class": .string("genp")], changes: ["v_Data": .data(Data())], context: "c3")
        ),
        .keychainDelete(KeychainRequest(attributes: ["class": .string("genp")], context: "c4")),
        .keychainList,
        .authorizeAccessControl(
            .init(context: "ac", flags: [.biometryAny, .and, .devicePasscode], options: .init(reason: "Open"))
        ),
        .configureAccessGroup(.init(name: "team", apps: ["/usr/bin/a", "/usr/bin/b"])),
        .accessGroups,
        .enrolments,
        .key(
            KeyRequest(
                operation: .sign,
                kind: .signing,
                blob: Data([1]),
                digest: Data(repeating: 7, count: 32),
                context: "k",
                reason: "sign"
            )
        ),
        .keychainRemove(.init(persistentRef: Data([9, 9]))),
        .audit(.init(limit: 10, everyApp: true)),
        .handoff(.init(kind: .secretInput)),
        .resetPasscodeLockout(.init(uid: nil)),
        .resetPasscodeLockout(.init(uid: 1000)),
        .remoteLock(.init(uid: nil)),
        .remoteLock(.init(uid: 0)),
        .servePrompts,
        .promptAction(.init(prompt: 1, action: PromptAction(.shown))),
        .promptAction(.init(prompt: 7, action: .typed("9876"))),
        .promptAction(.init(prompt: UInt64.max, action: PromptAction(.simulatedNoMatch))),
        .pamAuthenticate(.init(user: "alice", service: "sudo")),
        .pamAuthenticate(
            .init(
                user: "alice",
                service: "polkit-1",
                tty: "/dev/pts/3",
                remoteHost: "desk.example",
                password: .none,
                reuse: 30,
                onTerminal: true
            )
        ),
    ]

    func testEveryRequestRoundTrips() throws {
        for (i, request) in Self.everyRequest.enumerated() {
            let envelope = RequestEnvelope(id: UInt64(i) + 1, request: request)
            XCTAssertEqual(try RequestEnvelope.decode(envelope.encoded()), envelope, "\(request)")
        }
    }

    /// The coding a client offers travels under a name the PAM module and raw clients can write.
    func testHelloOffersCodingsUnderTheirJSONName() throws {
        let json = Array(#"{"id":1,"op":"hello","args":{"version":1,"encodings":["zstd","binary2"]}}"#.utf8)
        guard case .hello(let hello) = try RequestEnvelope.decode(json).request else { return XCTFail("a hello") }
        XCTAssertEqual(hello.chosenEncoding, .binary)
        let first = Array(#"{"id":1,"op":"hello","args":{"version":1,"encodings":["binary"]}}"#.utf8)
        guard case .hello(let firstForm) = try RequestEnvelope.decode(first).request else { return XCTFail("a hello") }
        XCTAssertEqual(firstForm.chosenEncoding, .json, "the first binary form, whose keychain values differ")
        let plain = Array(#"{"id":1,"op":"hello","args":{"version":1}}"#.utf8)
        guard case .hello(let old) = try RequestEnvelope.decode(plain).request else { return XCTFail("a hello") }
        XCTAssertEqual(old.chosenEncoding, .json, "a client from before offers nothing")
    }

    func testEveryOperationIsCoveredAndKnown() {
        let covered = Set(Self.everyRequest.map(\.operation.rawValue))
        XCTAssertEqual(covered, Request.operations)
        XCTAssertEqual(
            Request.operations.count,
            31,
            "16 of issue 2 + 6 keychain operations + key + 2 access-group operations + authorizeAccessControl + changePasscode (promptInput became handoff) + enrolments + the prompt agent's two + the PAM module's"
        )
    }

    /// The agent's answers: every kind travels; one the protocol does not know is bad arguments;
    /// the passcode is never in an answer's description (logs).
    func testPromptActionsTravelAndHideThePasscode() throws {
        for kind in PromptAction.Kind.allCases {
            let envelope = RequestEnvelope(
                id: 5,
                request: .promptAction(
                    .init(prompt: 2, action: PromptAction(kind, passcode: kind == .passcode ? "4321" : nil))
                )
            )
            XCTAssertEqual(try RequestEnvelope.decode(envelope.encoded()), envelope)
        }
        assertDecodingError(
            #"{"id": 6, "op": "promptAction", "args": {"prompt": 1, "action": {"kind": "approve"}}}"#,
            .invalidArguments,
            id: 6
        )
        assertDecodingError(
            #"{"id": 7, "op": "promptAction", "args": {"action": {"kind": "cancel"}}}"#,
            .invalidArguments,
            id: 7
        )
        XCTAssertFalse("\(PromptAction.typed("4321"))".contains("4321"))
        XCTAssertFalse("\(Request.promptAction(.init(prompt: 1, action: .typed("4321"))))".contains("4321"))
    }

    func testLargeIdRoundTrips() throws {
        let envelope = RequestEnvelope(id: UInt64.max, request: .status)
        XCTAssertEqual(try RequestEnvelope.decode(envelope.encoded()).id, UInt64.max)
    }

    func testEncodedShapeIsIdOpArgs() throws {
        let bytes = RequestEnvelope(id: 42, request: .canEvaluate(.init(context: "c", policy: 2))).encoded()
        let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        XCTAssertEqual(object?["id"] as? Int, 42)
        XCTAssertEqual(object?["op"] as? String, "canEvaluate")
        let args = object?["args"] as? [String: Any]
        XCTAssertEqual(args?["context"] as? String, "c")
        XCTAssertEqual(args?["policy"] as? Int, 2)
    }

    func testHandWrittenRequestDecodes() throws {
        XCTAssertEqual(
            try decode(#"{"id":3,"op":"canEvaluate","args":{"context":"abc","policy":1}}"#),
            RequestEnvelope(id: 3, request: .canEvaluate(.init(context: "abc", policy: 1)))
        )
        XCTAssertEqual(
            try decode(#"{"id":4,"op":"audit","args":{}}"#),
            RequestEnvelope(id: 4, request: .audit(.init(limit: 50, everyApp: false))),
            "audit's limit defaults to 50"
        )
    }

    /// Every operation as clients of protocol 1 wrote it before the arguments had types of their
    /// own (e585537's wire, by hand): it decodes to the same request and encodes back to the same
    /// JSON object, so a key renamed on both sides cannot pass unnoticed.
    func testEveryOperationReadsAndWritesTheWireAsBefore() throws {
        let options = #"{"reason":"Unlock","reuseDuration":0,"interactionNotAllowed":false,"onTerminal":false}"#
        let keychain = String(
            decoding: try JSONEncoder().encode(KeychainRequest(attributes: ["class": .string("genp")], context: "k")),
            as: UTF8.self
        )
        let key = String(
            decoding: try JSONEncoder().encode(KeyRequest(operation: .sign, kind: .signing, context: "k")),
            as: UTF8.self
        )
        let shown = String(decoding: try JSONEncoder().encode(PromptAction(.shown)), as: UTF8.self)
        let rows: [(op: String, args: String, Request)] = [
            ("hello", #"{"version":1}"#, .hello(.init(version: 1))),
            ("canEvaluate", #"{"context":"c","policy":1}"#, .canEvaluate(.init(context: "c", policy: 1))),
            (
                "evaluate", #"{"context":"c","policy":2,"options":\#(options)}"#,
                .evaluate(.init(context: "c", policy: 2, options: EvaluationOptions(reason: "Unlock")))
            ),
            (
                "authorizeAccessControl", #"{"context":"c","flags":2,"options":\#(options)}"#,
                .authorizeAccessControl(
                    .init(
                        context: "c",
                        flags: AccessControlFlags(rawValue: 2),
                        options: EvaluationOptions(reason: "Unlock")
                    )
                )
            ),
            ("handoff", #"{"kind":"terminal"}"#, .handoff(.init(kind: .terminal))),
            ("invalidate", #"{"context":"c"}"#, .invalidate(.init(context: "c"))),
            ("domainState", #"{"context":"c"}"#, .domainState(.init(context: "c"))),
            ("status", "{}", .status),
            ("setPasscode", "{}", .setPasscode),
            ("changePasscode", "{}", .changePasscode),
            ("removePasscode", "{}", .removePasscode),
            ("enroll", #"{"name":"right thumb"}"#, .enroll(.init(name: "right thumb"))),
            ("unenroll", #"{"name":"right thumb"}"#, .unenroll(.init(name: "right thumb"))),
            ("simulate", #"{"events":[]}"#, .simulate(.init(events: []))),
            ("clearSimulated", "{}", .clearSimulated),
            ("audit", #"{"limit":5,"everyApp":true}"#, .audit(.init(limit: 5, everyApp: true))),
            ("resetPasscodeLockout", #"{"uid":1000}"#, .resetPasscodeLockout(.init(uid: 1000))),
            ("remoteLock", #"{"uid":0}"#, .remoteLock(.init(uid: 0))),
            (
                "keychainAdd", #"{"keychain":\#(keychain)}"#,
                .keychainAdd(KeychainRequest(attributes: ["class": .string("genp")], context: "k"))
            ),
            (
                "keychainCopy", #"{"keychain":\#(keychain)}"#,
                .keychainCopy(KeychainRequest(attributes: ["class": .string("genp")], context: "k"))
            ),
            (
                "keychainUpdate", #"{"keychain":\#(keychain)}"#,
                .keychainUpdate(KeychainRequest(attributes: ["class": .string("genp")], context: "k"))
            ),
            (
                "keychainDelete", #"{"keychain":\#(keychain)}"#,
                .keychainDelete(KeychainRequest(attributes: ["class": .string("genp")], context: "k"))
            ),
            ("keychainList", "{}", .keychainList),
            ("keychainRemove", #"{"persistentRef":"CQk="}"#, .keychainRemove(.init(persistentRef: Data([9, 9])))),
            ("key", #"{"key":\#(key)}"#, .key(KeyRequest(operation: .sign, kind: .signing, context: "k"))),
            (
                "configureAccessGroup", #"{"name":"g","apps":["/usr/bin/a"]}"#,
                .configureAccessGroup(.init(name: "g", apps: ["/usr/bin/a"]))
            ),
            ("accessGroups", "{}", .accessGroups),
            ("enrolments", "{}", .enrolments),
            ("servePrompts", "{}", .servePrompts),
            (
                "promptAction", #"{"prompt":7,"action":\#(shown)}"#,
                .promptAction(.init(prompt: 7, action: PromptAction(.shown)))
            ),
            // As pam_laenclave.c writes it (tty and remoteHost only when PAM has them).
            (
                "pamAuthenticate",
                #"{"user":"alice","service":"sudo","tty":"/dev/pts/3","password":"login","reuse":0,"onTerminal":true}"#,
                .pamAuthenticate(.init(user: "alice", service: "sudo", tty: "/dev/pts/3", onTerminal: true))
            ),
        ]
        XCTAssertEqual(
            Set(rows.map(\.op)),
            Set(Request.Operation.allCases.map(\.rawValue)),
            "every operation has its row"
        )
        for (op, args, request) in rows {
            let json = #"{"id":9,"op":"\#(op)","args":\#(args)}"#
            XCTAssertEqual(try decode(json), RequestEnvelope(id: 9, request: request), op)
            let written =
                try JSONSerialization.jsonObject(with: Data(RequestEnvelope(id: 9, request: request).encoded()))
                as? NSDictionary
            let expected = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? NSDictionary
            XCTAssertEqual(written, expected, op)
        }
        // What may be left out, as before: no args at all for these, or only some of audit's.
        XCTAssertEqual(try decode(#"{"id":1,"op":"domainState"}"#).request, .domainState(.init(context: nil)))
        XCTAssertEqual(try decode(#"{"id":1,"op":"status"}"#).request, .status)
        XCTAssertEqual(
            try decode(#"{"id":1,"op":"audit","args":{"everyApp":true}}"#).request,
            .audit(.init(limit: 50, everyApp: true))
        )
        XCTAssertEqual(
            try decode(#"{"id":1,"op":"resetPasscodeLockout"}"#).request,
            .resetPasscodeLockout(.init(uid: nil))
        )
    }

    func testUnknownOperationCarriesId() {
        assertDecodingError(#"{"id":7,"op":"frobnicate","args":{}}"#, .unknownOperation, id: 7)
        assertDecodingError(#"{"id":8,"op":"","args":{}}"#, .unknownOperation, id: 8)
        assertDecodingError(#"{"id":9,"op":"Status","args":{}}"#, .unknownOperation, id: 9)
        // No request carries the person's keys (the daemon reads them from the handed terminal).
        assertDecodingError(
            #"{"id":10,"op":"promptInput","args":{"context":"c","action":"passcode","passcode":"1234"}}"#,
            .unknownOperation,
            id: 10
        )
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
        XCTAssertEqual(
            try decode(#"{"id":19,"op":"removePasscode","args":{"current":"1234"}}"#),
            RequestEnvelope(id: 19, request: .removePasscode)
        )
    }

    func testIllTypedArgumentsAreInvalidArgumentsWithId() {
        assertDecodingError(
            #"{"id":21,"op":"canEvaluate","args":{"context":"c","policy":"one"}}"#,
            .invalidArguments,
            id: 21
        )
        assertDecodingError(#"{"id":22,"op":"hello","args":{"version":1.5}}"#, .invalidArguments, id: 22)
        assertDecodingError(#"{"id":23,"op":"handoff","args":{"kind":"dance"}}"#, .invalidArguments, id: 23)
        assertDecodingError(#"{"id":24,"op":"remoteLock","args":{"uid":-1}}"#, .invalidArguments, id: 24)
        assertDecodingError(
            #"{"id":25,"op":"simulate","args":{"events":[{"kind":"wave"}]}}"#,
            .invalidArguments,
            id: 25
        )
        assertDecodingError(
            #"{"id":26,"op":"evaluate","args":{"context":"c","policy":1,"options":{"reason":5}}}"#,
            .invalidArguments,
            id: 26
        )
        assertDecodingError(#"{"id":27,"op":"status","args":[]}"#, .invalidArguments, id: 27)
    }

    func testNonJSONIsMalformedWithoutId() {
        assertDecodingError("this is not json", .malformed, id: nil)
        assertDecodingError("", .malformed, id: nil)
        assertDecodingError(#"{"id":5,"op":"status","#, .malformed, id: nil)
        XCTAssertThrowsError(try RequestEnvelope.decode([0xff, 0xfe, 0x00])) { error in
            XCTAssertEqual((error as? WireError)?.code, .malformed)
            XCTAssertNil((error as? WireError)?.id)
        }
    }

    func testUnreadableHeaderIsMalformedWithoutId() {
        assertDecodingError(#"[1,2,3]"#, .malformed, id: nil)
        assertDecodingError(#"{"op":"status","args":{}}"#, .malformed, id: nil)
        assertDecodingError(#"{"id":"5","op":"status","args":{}}"#, .malformed, id: nil)
        assertDecodingError(#"{"id":-5,"op":"status","args":{}}"#, .malformed, id: nil)
        assertDecodingError(#"{"id":5,"op":7,"args":{}}"#, .malformed, id: nil)
    }
}
