import Foundation

/// Requests: `{"id": <UInt64>, "op": "<operation>", "args": {…}}`. Replies carry the request's id;
/// an evaluation sends any number of `prompt` replies before its final `evaluated` reply.
public enum Request: Sendable, Equatable {
    case hello(version: Int)
    case canEvaluate(context: String, policy: Int)
    case evaluate(context: String, policy: Int, options: EvaluationOptions)
    /// `evaluateAccessControl`: every constraint of a `SecAccessControlCreateFlags` value, on the
    /// context, by the daemon's own reading of the flags. Answered like `evaluate`.
    case authorizeAccessControl(context: String, flags: AccessControlFlags, options: EvaluationOptions)
    /// A one-time ticket to hand the daemon a descriptor on its handoff socket
    /// (`EnclavePaths.handoffSocket`): the terminal the daemon draws its prompt on. Answered with
    /// `handoffTicket`. There is no request that carries the person's keys: the daemon reads them
    /// from the handed terminal itself, so the passcode never passes through the app.
    case handoff(kind: HandedDescriptor)
    case invalidate(context: String)
    case domainState(context: String?)
    case status
    // Administration: reaches beyond the calling app, so the person allows it on the trusted prompt
    // (the terminal handed with `handoff(.terminal)`) or a script hands the passcode through a pipe
    // (`handoff(.secretInput)`); no request carries a passcode (`AdminPolicy.purpose` says what is asked).
    /// Sets the device passcode when none is set: the daemon asks for the new one.
    case setPasscode
    /// The daemon asks for the current passcode, then the new one.
    case changePasscode
    /// The daemon asks for the current passcode.
    case removePasscode
    case enroll(name: String)
    case unenroll(name: String)
    case simulate(events: [SimulatedEvent])
    case clearSimulated
    /// The caller's audit entries; `everyApp`: those of all the user's apps (the daemon asks for the passcode).
    case audit(limit: Int, everyApp: Bool)
    /// Clears the passcode-disabled state and its counters: root; in user mode also the person, with
    /// the login password the daemon asks for (`AdminPolicy.passcodeLockoutReset`).
    case resetPasscodeLockout(uid: UInt32?)
    /// Refuses biometrics until the passcode is entered, like Apple's remote-lock command.
    case remoteLock(uid: UInt32?)
    case keychainAdd(KeychainRequest)
    case keychainCopy(KeychainRequest)
    case keychainUpdate(KeychainRequest)
    case keychainDelete(KeychainRequest)
    /// Every item of the user, of every app (metadata only); the daemon asks for the passcode.
    case keychainList
    /// Deletes any of the user's items by persistent reference; the daemon asks for the passcode.
    case keychainRemove(persistentRef: Data)
    /// A Secure Enclave key operation.
    case key(KeyRequest)
    /// Sets which apps (executable paths) share a keychain access group; no apps removes the
    /// group. The daemon asks for the passcode: only the person decides what apps share.
    case configureAccessGroup(name: String, apps: [String])
    /// The user's access groups and their apps; the daemon asks for the passcode.
    case accessGroups
    /// The names of the user's enrolled identities; the daemon asks for the passcode (`status`
    /// gives apps only how many).
    case enrolments
    /// The prompt agent offers to draw the prompts of its session (`PromptAgent.swift`): admitted
    /// only for the installed agent's executable; answered with `agentEvent`s, never finally
    /// while it serves.
    case servePrompts
    /// The agent's answer to a screen it shows (only the serving agent's connection may send it).
    case promptAction(prompt: UInt64, action: PromptAction)

    /// The operation's name on the wire.
    public var operation: Operation {
        switch self {
        case .hello: return .hello
        case .canEvaluate: return .canEvaluate
        case .evaluate: return .evaluate
        case .authorizeAccessControl: return .authorizeAccessControl
        case .handoff: return .handoff
        case .invalidate: return .invalidate
        case .domainState: return .domainState
        case .status: return .status
        case .setPasscode: return .setPasscode
        case .changePasscode: return .changePasscode
        case .removePasscode: return .removePasscode
        case .enroll: return .enroll
        case .unenroll: return .unenroll
        case .simulate: return .simulate
        case .clearSimulated: return .clearSimulated
        case .audit: return .audit
        case .resetPasscodeLockout: return .resetPasscodeLockout
        case .remoteLock: return .remoteLock
        case .keychainAdd: return .keychainAdd
        case .keychainCopy: return .keychainCopy
        case .keychainUpdate: return .keychainUpdate
        case .keychainDelete: return .keychainDelete
        case .keychainList: return .keychainList
        case .keychainRemove: return .keychainRemove
        case .key: return .key
        case .configureAccessGroup: return .configureAccessGroup
        case .accessGroups: return .accessGroups
        case .enrolments: return .enrolments
        case .servePrompts: return .servePrompts
        case .promptAction: return .promptAction
        }
    }

    /// Every operation's wire name: the one list (decoding switches over it exhaustively).
    public enum Operation: String, Codable, Sendable, CaseIterable {
        case hello, canEvaluate, evaluate, authorizeAccessControl, handoff, invalidate, domainState, status, setPasscode
        case changePasscode, removePasscode, enroll, unenroll, simulate, clearSimulated, audit, resetPasscodeLockout, remoteLock
        case keychainAdd, keychainCopy, keychainUpdate, keychainDelete, keychainList, keychainRemove, key, configureAccessGroup, accessGroups
        case enrolments, servePrompts, promptAction
    }

    public static var operations: Set<String> { Set(Operation.allCases.map(\.rawValue)) }
}

public struct EvaluationOptions: Codable, Sendable, Equatable {
    public var reason: String
    public var cancelTitle: String?
    public var fallbackTitle: String?
    public var reuseDuration: Double
    public var interactionNotAllowed: Bool
    /// Draw the prompt on the terminal this connection handed over (`handoff`), and read the
    /// person's keys there; otherwise the prompt is headless (screens go to the client as `prompt`
    /// replies, and only the sensor or a simulated person can answer).
    public var onTerminal: Bool

    public init(reason: String, cancelTitle: String? = nil, fallbackTitle: String? = nil, reuseDuration: Double = 0,
                interactionNotAllowed: Bool = false, onTerminal: Bool = false) {
        self.reason = reason; self.cancelTitle = cancelTitle; self.fallbackTitle = fallbackTitle
        self.reuseDuration = reuseDuration; self.interactionNotAllowed = interactionNotAllowed
        self.onTerminal = onTerminal
    }
}

public struct RequestEnvelope: Sendable, Equatable {
    public var id: UInt64
    public var request: Request
    public init(id: UInt64, request: Request) { self.id = id; self.request = request }
}

/// Why a payload could not be turned into a request. `id` is present when the header was readable,
/// so the error answer can be matched to the request.
public struct RequestDecodingError: Error, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable { case malformed, unknownOperation, invalidArguments }
    public var kind: Kind
    public var id: UInt64?
    public var detail: String
    public var description: String { "\(kind.rawValue): \(detail)" }
}

/// The wire's request: `{"id": 7, "op": "canEvaluate", "args": {…}}`, with one Codable payload per
/// shape of arguments; decoded in one pass (the operation is read first and chooses the payload).
private enum WireKey: String, CodingKey { case id, op, args }

/// The arguments of each operation, exactly as they travel.
private enum Payload {
    /// No arguments, but what is sent must still be an object.
    struct None: Codable {
        private enum NoKeys: CodingKey {}
        init() {}
        init(from decoder: any Decoder) throws { _ = try decoder.container(keyedBy: NoKeys.self) }
        func encode(to encoder: any Encoder) throws { _ = encoder.container(keyedBy: NoKeys.self) }
    }
    struct Hello: Codable { var version: Int }
    struct ContextPolicy: Codable { var context: String; var policy: Int }
    struct Evaluate: Codable { var context: String; var policy: Int; var options: EvaluationOptions }
    struct AccessControl: Codable { var context: String; var flags: AccessControlFlags; var options: EvaluationOptions }
    struct Handoff: Codable { var kind: HandedDescriptor }
    struct Context: Codable { var context: String }
    struct MaybeContext: Codable { var context: String? }
    struct Name: Codable { var name: String }
    struct Simulate: Codable { var events: [SimulatedEvent] }
    struct Audit: Codable { var limit: Int?; var everyApp: Bool? }
    struct MaybeUID: Codable { var uid: UInt32? }
    struct Keychain: Codable { var keychain: KeychainRequest }
    struct KeychainRemove: Codable { var persistentRef: Data }
    struct Key: Codable { var key: KeyRequest }
    struct AccessGroup: Codable { var name: String; var apps: [String] }
    struct PromptAction: Codable { var prompt: UInt64; var action: EnclaveProtocol.PromptAction }
}

private struct WireRequest: Codable {
    var envelope: RequestEnvelope

    init(_ envelope: RequestEnvelope) { self.envelope = envelope }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: WireKey.self)
        try c.encode(envelope.id, forKey: .id)
        try c.encode(envelope.request.operation, forKey: .op)
        func args<T: Encodable>(_ payload: T) throws { try c.encode(payload, forKey: .args) }
        switch envelope.request {
        case .hello(let v): try args(Payload.Hello(version: v))
        case .canEvaluate(let c, let p): try args(Payload.ContextPolicy(context: c, policy: p))
        case .evaluate(let c, let p, let o): try args(Payload.Evaluate(context: c, policy: p, options: o))
        case .authorizeAccessControl(let c, let f, let o): try args(Payload.AccessControl(context: c, flags: f, options: o))
        case .handoff(let kind): try args(Payload.Handoff(kind: kind))
        case .invalidate(let c): try args(Payload.Context(context: c))
        case .domainState(let c): try args(Payload.MaybeContext(context: c))
        case .status, .clearSimulated, .setPasscode, .changePasscode, .removePasscode, .keychainList, .accessGroups, .enrolments, .servePrompts:
            try args(Payload.None())
        case .promptAction(let prompt, let action): try args(Payload.PromptAction(prompt: prompt, action: action))
        case .enroll(let n), .unenroll(let n): try args(Payload.Name(name: n))
        case .simulate(let e): try args(Payload.Simulate(events: e))
        case .audit(let l, let every): try args(Payload.Audit(limit: l, everyApp: every))
        case .resetPasscodeLockout(let u), .remoteLock(let u): try args(Payload.MaybeUID(uid: u))
        case .keychainAdd(let k), .keychainCopy(let k), .keychainUpdate(let k), .keychainDelete(let k): try args(Payload.Keychain(keychain: k))
        case .keychainRemove(let r): try args(Payload.KeychainRemove(persistentRef: r))
        case .key(let k): try args(Payload.Key(key: k))
        case .configureAccessGroup(let n, let apps): try args(Payload.AccessGroup(name: n, apps: apps))
        }
    }

    init(from decoder: any Decoder) throws {
        let c: KeyedDecodingContainer<WireKey>
        let id: UInt64
        let name: String
        do {
            c = try decoder.container(keyedBy: WireKey.self)
            id = try c.decode(UInt64.self, forKey: .id)
            name = try c.decode(String.self, forKey: .op)
        } catch {
            throw RequestDecodingError(kind: .malformed, id: nil, detail: "not a request object with a numeric \"id\" and a string \"op\"")
        }
        guard let op = Request.Operation(rawValue: name) else {
            throw RequestDecodingError(kind: .unknownOperation, id: id, detail: "unknown operation \"\(name.prefix(64))\"")
        }
        do {
            envelope = RequestEnvelope(id: id, request: try Self.request(op, from: c))
        } catch {
            throw RequestDecodingError(kind: .invalidArguments, id: id, detail: "arguments of \(name) are malformed: \(RequestEnvelope.describe(error))")
        }
    }

    private static func request(_ op: Request.Operation, from c: KeyedDecodingContainer<WireKey>) throws -> Request {
        func args<T: Decodable>(_ type: T.Type) throws -> T { try c.decode(type, forKey: .args) }
        /// Operations whose arguments may all be left out.
        func optionalArgs<T: Decodable>(_ type: T.Type) throws -> T? { try c.decodeIfPresent(type, forKey: .args) }
        switch op {
        case .hello: return .hello(version: try args(Payload.Hello.self).version)
        case .canEvaluate:
            let a = try args(Payload.ContextPolicy.self)
            return .canEvaluate(context: a.context, policy: a.policy)
        case .evaluate:
            let a = try args(Payload.Evaluate.self)
            return .evaluate(context: a.context, policy: a.policy, options: a.options)
        case .authorizeAccessControl:
            let a = try args(Payload.AccessControl.self)
            return .authorizeAccessControl(context: a.context, flags: a.flags, options: a.options)
        case .handoff: return .handoff(kind: try args(Payload.Handoff.self).kind)
        case .invalidate: return .invalidate(context: try args(Payload.Context.self).context)
        case .domainState: return .domainState(context: try optionalArgs(Payload.MaybeContext.self)?.context)
        case .status:
            _ = try optionalArgs(Payload.None.self)
            return .status
        case .clearSimulated:
            _ = try optionalArgs(Payload.None.self)
            return .clearSimulated
        case .setPasscode:
            _ = try optionalArgs(Payload.None.self)
            return .setPasscode
        case .changePasscode:
            _ = try optionalArgs(Payload.None.self)
            return .changePasscode
        case .removePasscode:
            _ = try optionalArgs(Payload.None.self)
            return .removePasscode
        case .enroll: return .enroll(name: try args(Payload.Name.self).name)
        case .unenroll: return .unenroll(name: try args(Payload.Name.self).name)
        case .simulate: return .simulate(events: try args(Payload.Simulate.self).events)
        case .audit:
            let a = try optionalArgs(Payload.Audit.self)
            return .audit(limit: a?.limit ?? 50, everyApp: a?.everyApp ?? false)
        case .resetPasscodeLockout: return .resetPasscodeLockout(uid: try optionalArgs(Payload.MaybeUID.self)?.uid)
        case .remoteLock: return .remoteLock(uid: try optionalArgs(Payload.MaybeUID.self)?.uid)
        case .keychainAdd: return .keychainAdd(try args(Payload.Keychain.self).keychain)
        case .keychainCopy: return .keychainCopy(try args(Payload.Keychain.self).keychain)
        case .keychainUpdate: return .keychainUpdate(try args(Payload.Keychain.self).keychain)
        case .keychainDelete: return .keychainDelete(try args(Payload.Keychain.self).keychain)
        case .keychainList:
            _ = try optionalArgs(Payload.None.self)
            return .keychainList
        case .keychainRemove: return .keychainRemove(persistentRef: try args(Payload.KeychainRemove.self).persistentRef)
        case .key: return .key(try args(Payload.Key.self).key)
        case .configureAccessGroup:
            let a = try args(Payload.AccessGroup.self)
            return .configureAccessGroup(name: a.name, apps: a.apps)
        case .accessGroups:
            _ = try optionalArgs(Payload.None.self)
            return .accessGroups
        case .enrolments:
            _ = try optionalArgs(Payload.None.self)
            return .enrolments
        case .servePrompts:
            _ = try optionalArgs(Payload.None.self)
            return .servePrompts
        case .promptAction:
            let a = try args(Payload.PromptAction.self)
            return .promptAction(prompt: a.prompt, action: a.action)
        }
    }
}

extension RequestEnvelope {
    public func encoded() -> [UInt8] {
        Array(try! WireCoders.requestEncoder.encode(WireRequest(self)))
    }

    public static func decode(_ payload: [UInt8]) throws -> RequestEnvelope {
        do {
            return try WireCoders.requestDecoder.decode(WireRequest.self, from: Data(payload)).envelope
        } catch let e as RequestDecodingError {
            throw e
        } catch {
            throw RequestDecodingError(kind: .malformed, id: nil, detail: "not a request object with a numeric \"id\" and a string \"op\"")
        }
    }

    static func describe(_ error: Error) -> String {
        guard let e = error as? DecodingError else { return "\(error)" }
        switch e {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .keyNotFound(_, let c), .dataCorrupted(let c):
            let path = c.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? c.debugDescription : "\(path): \(c.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}

// MARK: - Replies

public enum FailureCode: String, Codable, Sendable {
    case malformedMessage, unknownOperation, invalidParameter, unsupportedVersion, outOfOrder
    case notPermitted, passcodeIncorrect, passcodeNotSet, passcodeAlreadySet, passcodeRetryLater, passcodeDisabled
    case notFound, alreadyExists, simulationDisabled, noSensor, busy, internalError
}

public struct Failure: Codable, Sendable, Equatable, Error, CustomStringConvertible {
    public var code: FailureCode
    public var message: String
    public var retryAfter: Double?
    public init(_ code: FailureCode, _ message: String, retryAfter: Double? = nil) {
        self.code = code; self.message = message; self.retryAfter = retryAfter
    }
    public var description: String { "\(code.rawValue): \(message)" }
}

public struct HelloReply: Codable, Sendable, Equatable {
    public var version: Int
    public var mode: DaemonMode
    public var uid: UInt32
    public var app: String
    public init(version: Int, mode: DaemonMode, uid: UInt32, app: String) { self.version = version; self.mode = mode; self.uid = uid; self.app = app }
}

public struct CanEvaluateReply: Codable, Sendable, Equatable {
    public var biometryType: BiometryKind
    public var error: LAErrorCode?
    public var message: String?
    public var domainState: Data?
    public init(biometryType: BiometryKind, error: LAErrorCode?, message: String?, domainState: Data?) {
        self.biometryType = biometryType; self.error = error; self.message = message; self.domainState = domainState
    }
}

public struct EvaluationResult: Codable, Sendable, Equatable {
    public var success: Bool
    public var error: LAErrorCode?
    public var message: String?
    public var biometryType: BiometryKind
    public var domainState: Data?
    public init(success: Bool, error: LAErrorCode?, message: String?, biometryType: BiometryKind, domainState: Data?) {
        self.success = success; self.error = error; self.message = message; self.biometryType = biometryType; self.domainState = domainState
    }
}

public struct DomainStateReply: Codable, Sendable, Equatable {
    public var biometryType: BiometryKind
    public var stateHash: Data?
    public init(biometryType: BiometryKind, stateHash: Data?) { self.biometryType = biometryType; self.stateHash = stateHash }
}

public enum Reply: Sendable, Equatable {
    case hello(HelloReply)
    case ok
    case canEvaluate(CanEvaluateReply)
    case prompt(PromptScreen)
    case evaluated(EvaluationResult)
    case domainState(DomainStateReply)
    case status(UserStatus)
    case audit([AuditEntry])
    case keychain(KeychainReply)
    case keychainListing([KeychainListing])
    case key(KeyReply)
    case accessGroups([String: [String]])
    /// `enrolments`: the enrolled identities' names.
    case enrolments([String])
    /// `handoff`'s one-time ticket (`Handoff.ticketBytes` bytes).
    case handoffTicket(Data)
    /// An enrolment's progress on a real reader, before its final `ok` (not final).
    case enrollProgress(EnrolmentProgress)
    /// To the serving prompt agent: a screen to show or a prompt to close (not final).
    case agentEvent(AgentEvent)
    case failure(Failure)

    public var isFinal: Bool {
        switch self {
        case .prompt, .enrollProgress, .agentEvent: return false
        default: return true
        }
    }
}

public struct ReplyEnvelope: Codable, Sendable, Equatable {
    public var id: UInt64
    public var reply: Reply
    public init(id: UInt64, reply: Reply) { self.id = id; self.reply = reply }

    public func encoded() -> [UInt8] { Array(try! WireCoders.replyEncoder.encode(self)) }
    public static func decode(_ payload: [UInt8]) throws -> ReplyEnvelope { try WireCoders.replyDecoder.decode(ReplyEnvelope.self, from: Data(payload)) }
}

/// The wire's JSON coders, made once: a coder is safe to share between threads, and making one
/// per message cost more than some messages' own coding.
private enum WireCoders {
    static let requestEncoder = JSONEncoder()
    static let requestDecoder = JSONDecoder()
    /// Replies carry dates as seconds since 1970, both ways.
    static let replyEncoder: JSONEncoder = { let e = JSONEncoder(); e.dateEncodingStrategy = .secondsSince1970; return e }()
    static let replyDecoder: JSONDecoder = { let d = JSONDecoder(); d.dateDecodingStrategy = .secondsSince1970; return d }()
}

extension Reply: Codable {
    private enum K: String, CodingKey { case kind, value }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: K.self)
        switch try c.decode(String.self, forKey: .kind) {
        case "hello": self = .hello(try c.decode(HelloReply.self, forKey: .value))
        case "ok": self = .ok
        case "canEvaluate": self = .canEvaluate(try c.decode(CanEvaluateReply.self, forKey: .value))
        case "prompt": self = .prompt(try c.decode(PromptScreen.self, forKey: .value))
        case "evaluated": self = .evaluated(try c.decode(EvaluationResult.self, forKey: .value))
        case "domainState": self = .domainState(try c.decode(DomainStateReply.self, forKey: .value))
        case "status": self = .status(try c.decode(UserStatus.self, forKey: .value))
        case "audit": self = .audit(try c.decode([AuditEntry].self, forKey: .value))
        case "keychain": self = .keychain(try c.decode(KeychainReply.self, forKey: .value))
        case "key": self = .key(try c.decode(KeyReply.self, forKey: .value))
        case "accessGroups": self = .accessGroups(try c.decode([String: [String]].self, forKey: .value))
        case "enrolments": self = .enrolments(try c.decode([String].self, forKey: .value))
        case "keychainListing": self = .keychainListing(try c.decode([KeychainListing].self, forKey: .value))
        case "enrollProgress": self = .enrollProgress(try c.decode(EnrolmentProgress.self, forKey: .value))
        case "agentEvent": self = .agentEvent(try c.decode(AgentEvent.self, forKey: .value))
        case "failure": self = .failure(try c.decode(Failure.self, forKey: .value))
        case "handoffTicket": self = .handoffTicket(try c.decode(Data.self, forKey: .value))
        case let other: throw DecodingError.dataCorruptedError(forKey: .kind, in: c, debugDescription: "unknown reply kind \(other)")
        }
    }
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: K.self)
        switch self {
        case .hello(let v): try c.encode("hello", forKey: .kind); try c.encode(v, forKey: .value)
        case .ok: try c.encode("ok", forKey: .kind)
        case .canEvaluate(let v): try c.encode("canEvaluate", forKey: .kind); try c.encode(v, forKey: .value)
        case .prompt(let v): try c.encode("prompt", forKey: .kind); try c.encode(v, forKey: .value)
        case .enrollProgress(let v): try c.encode("enrollProgress", forKey: .kind); try c.encode(v, forKey: .value)
        case .agentEvent(let v): try c.encode("agentEvent", forKey: .kind); try c.encode(v, forKey: .value)
        case .evaluated(let v): try c.encode("evaluated", forKey: .kind); try c.encode(v, forKey: .value)
        case .domainState(let v): try c.encode("domainState", forKey: .kind); try c.encode(v, forKey: .value)
        case .status(let v): try c.encode("status", forKey: .kind); try c.encode(v, forKey: .value)
        case .audit(let v): try c.encode("audit", forKey: .kind); try c.encode(v, forKey: .value)
        case .keychain(let v): try c.encode("keychain", forKey: .kind); try c.encode(v, forKey: .value)
        case .keychainListing(let v): try c.encode("keychainListing", forKey: .kind); try c.encode(v, forKey: .value)
        case .key(let v): try c.encode("key", forKey: .kind); try c.encode(v, forKey: .value)
        case .accessGroups(let v): try c.encode("accessGroups", forKey: .kind); try c.encode(v, forKey: .value)
        case .enrolments(let v): try c.encode("enrolments", forKey: .kind); try c.encode(v, forKey: .value)
        case .handoffTicket(let v): try c.encode("handoffTicket", forKey: .kind); try c.encode(v, forKey: .value)
        case .failure(let v): try c.encode("failure", forKey: .kind); try c.encode(v, forKey: .value)
        }
    }
}
