import Foundation

/// Requests: `{"id": <UInt64>, "op": "<operation>", "args": {…}}`. Replies carry the request's id;
/// an evaluation sends any number of `prompt` replies before its final `evaluated` reply.
///
/// The one list of operations: each case carries its arguments as one type
/// (`Requests/<Name>.swift`, with its own checks), or none. Encoding, decoding and the
/// operation's name follow from `wire` and `init(_:arguments:)` below; the daemon's answer to
/// each is in `ConnectionHandler`, and `AdminPolicy.purpose` says which need the person.
public enum Request: Sendable, Equatable {
    case hello(Hello)
    case canEvaluate(CanEvaluate)
    case evaluate(Evaluate)
    case authorizeAccessControl(AuthorizeAccessControl)
    case handoff(Handoff)
    case invalidate(Invalidate)
    case domainState(DomainState)
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
    case enroll(Enroll)
    case unenroll(Unenroll)
    case simulate(Simulate)
    case clearSimulated
    case audit(Audit)
    case resetPasscodeLockout(ResetPasscodeLockout)
    case remoteLock(RemoteLock)
    case keychainAdd(KeychainRequest)
    case keychainCopy(KeychainRequest)
    case keychainUpdate(KeychainRequest)
    case keychainDelete(KeychainRequest)
    /// Every item of the user, of every app (metadata only); the daemon asks for the passcode.
    case keychainList
    case keychainRemove(KeychainRemove)
    /// A Secure Enclave key operation.
    case key(KeyRequest)
    case configureAccessGroup(ConfigureAccessGroup)
    /// The user's access groups and their apps; the daemon asks for the passcode.
    case accessGroups
    /// The names of the user's enrolled identities; the daemon asks for the passcode (`status`
    /// gives apps only how many).
    case enrolments
    /// The prompt agent offers to draw the prompts of its session (`PromptAgent.swift`): admitted
    /// only for the installed agent's executable; answered with `agentEvent`s, never finally
    /// while it serves.
    case servePrompts
    case promptAction(PromptAnswer)
    /// `pam_laenclave.so` asks the system daemon to authenticate a user (`PAMAuthenticate`).
    case pamAuthenticate(PAMAuthenticate)

    /// The operation's name and its arguments as they travel (nil: none).
    public var wire: (operation: Operation, arguments: (any RequestArguments)?) {
        switch self {
        case .hello(let a): (.hello, a)
        case .canEvaluate(let a): (.canEvaluate, a)
        case .evaluate(let a): (.evaluate, a)
        case .authorizeAccessControl(let a): (.authorizeAccessControl, a)
        case .handoff(let a): (.handoff, a)
        case .invalidate(let a): (.invalidate, a)
        case .domainState(let a): (.domainState, a)
        case .status: (.status, nil)
        case .setPasscode: (.setPasscode, nil)
        case .changePasscode: (.changePasscode, nil)
        case .removePasscode: (.removePasscode, nil)
        case .enroll(let a): (.enroll, a)
        case .unenroll(let a): (.unenroll, a)
        case .simulate(let a): (.simulate, a)
        case .clearSimulated: (.clearSimulated, nil)
        case .audit(let a): (.audit, a)
        case .resetPasscodeLockout(let a): (.resetPasscodeLockout, a)
        case .remoteLock(let a): (.remoteLock, a)
        case .keychainAdd(let a): (.keychainAdd, KeychainArguments(keychain: a))
        case .keychainCopy(let a): (.keychainCopy, KeychainArguments(keychain: a))
        case .keychainUpdate(let a): (.keychainUpdate, KeychainArguments(keychain: a))
        case .keychainDelete(let a): (.keychainDelete, KeychainArguments(keychain: a))
        case .keychainList: (.keychainList, nil)
        case .keychainRemove(let a): (.keychainRemove, a)
        case .key(let a): (.key, KeyArguments(key: a))
        case .configureAccessGroup(let a): (.configureAccessGroup, a)
        case .accessGroups: (.accessGroups, nil)
        case .enrolments: (.enrolments, nil)
        case .servePrompts: (.servePrompts, nil)
        case .promptAction(let a): (.promptAction, a)
        case .pamAuthenticate(let a): (.pamAuthenticate, a)
        }
    }

    /// The request `operation` names, its arguments read by `arguments` (which infers their type
    /// from the case; nil where they may all be left out).
    init(_ operation: Operation, arguments: Arguments) throws {
        switch operation {
        case .hello: self = .hello(try arguments.required())
        case .canEvaluate: self = .canEvaluate(try arguments.required())
        case .evaluate: self = .evaluate(try arguments.required())
        case .authorizeAccessControl: self = .authorizeAccessControl(try arguments.required())
        case .handoff: self = .handoff(try arguments.required())
        case .invalidate: self = .invalidate(try arguments.required())
        case .domainState: self = .domainState(try arguments.optional() ?? DomainState())
        case .status: self = try arguments.none(.status)
        case .setPasscode: self = try arguments.none(.setPasscode)
        case .changePasscode: self = try arguments.none(.changePasscode)
        case .removePasscode: self = try arguments.none(.removePasscode)
        case .enroll: self = .enroll(try arguments.required())
        case .unenroll: self = .unenroll(try arguments.required())
        case .simulate: self = .simulate(try arguments.required())
        case .clearSimulated: self = try arguments.none(.clearSimulated)
        case .audit: self = .audit(try arguments.optional() ?? Audit())
        case .resetPasscodeLockout: self = .resetPasscodeLockout(try arguments.optional() ?? ResetPasscodeLockout())
        case .remoteLock: self = .remoteLock(try arguments.optional() ?? RemoteLock())
        case .keychainAdd: self = .keychainAdd(try arguments.required(KeychainArguments.self).keychain)
        case .keychainCopy: self = .keychainCopy(try arguments.required(KeychainArguments.self).keychain)
        case .keychainUpdate: self = .keychainUpdate(try arguments.required(KeychainArguments.self).keychain)
        case .keychainDelete: self = .keychainDelete(try arguments.required(KeychainArguments.self).keychain)
        case .keychainList: self = try arguments.none(.keychainList)
        case .keychainRemove: self = .keychainRemove(try arguments.required())
        case .key: self = .key(try arguments.required(KeyArguments.self).key)
        case .configureAccessGroup: self = .configureAccessGroup(try arguments.required())
        case .accessGroups: self = try arguments.none(.accessGroups)
        case .enrolments: self = try arguments.none(.enrolments)
        case .servePrompts: self = try arguments.none(.servePrompts)
        case .promptAction: self = .promptAction(try arguments.required())
        case .pamAuthenticate: self = .pamAuthenticate(try arguments.required())
        }
    }

    /// The operation's name on the wire.
    public var operation: Operation { wire.operation }

    /// Refuses arguments no daemon state could make right (`invalidParameter`).
    public func validate() throws(Failure) {
        try wire.arguments?.validate()
    }

    /// Every operation's wire name.
    public enum Operation: String, Codable, Sendable, CaseIterable {
        case hello, canEvaluate, evaluate, authorizeAccessControl, handoff, invalidate, domainState, status, setPasscode
        case changePasscode, removePasscode, enroll, unenroll, simulate, clearSimulated, audit, resetPasscodeLockout,
            remoteLock
        case keychainAdd, keychainCopy, keychainUpdate, keychainDelete, keychainList, keychainRemove, key,
            configureAccessGroup, accessGroups
        case enrolments, servePrompts, promptAction, pamAuthenticate
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

    public init(
        reason: String,
        cancelTitle: String? = nil,
        fallbackTitle: String? = nil,
        reuseDuration: Double = 0,
        interactionNotAllowed: Bool = false,
        onTerminal: Bool = false
    ) {
        self.reason = reason
        self.cancelTitle = cancelTitle
        self.fallbackTitle = fallbackTitle
        self.reuseDuration = reuseDuration
        self.interactionNotAllowed = interactionNotAllowed
        self.onTerminal = onTerminal
    }
}

public struct RequestEnvelope: Sendable, Equatable {
    public var id: UInt64
    public var request: Request
    public init(id: UInt64, request: Request) {
        self.id = id
        self.request = request
    }
}

/// The wire's request: `{"id": 7, "op": "canEvaluate", "args": {…}}`, decoded in one pass (the
/// operation is read first and chooses the arguments' type).
private enum WireKey: String, CodingKey { case id, op, args }

/// A keychain call's arguments travel as `{"keychain": {…}}`, a key operation's as `{"key": {…}}`.
private struct KeychainArguments: RequestArguments {
    var keychain: KeychainRequest
    func validate() throws(Failure) { try keychain.validate() }
}

private struct KeyArguments: RequestArguments {
    var key: KeyRequest
    func validate() throws(Failure) { try key.validate() }
}

/// No arguments, but what is sent must still be an object.
private struct NoArguments: Codable {
    private enum NoKeys: CodingKey {}
    init() {}
    init(from decoder: any Decoder) throws { _ = try decoder.container(keyedBy: NoKeys.self) }
    func encode(to encoder: any Encoder) throws { _ = encoder.container(keyedBy: NoKeys.self) }
}

extension Request {
    /// A request's `args`, read as the type its operation takes.
    struct Arguments {
        fileprivate let container: KeyedDecodingContainer<WireKey>

        func required<T: Decodable>(_ type: T.Type = T.self) throws -> T { try container.decode(type, forKey: .args) }
        /// Arguments that may all be left out.
        func optional<T: Decodable>(_ type: T.Type = T.self) throws -> T? {
            try container.decodeIfPresent(type, forKey: .args)
        }
        /// An operation without arguments: `args` may be left out, and is otherwise an empty object.
        func none(_ request: Request) throws -> Request {
            _ = try container.decodeIfPresent(NoArguments.self, forKey: .args)
            return request
        }
    }
}

private struct WireRequest: Codable {
    var envelope: RequestEnvelope

    init(_ envelope: RequestEnvelope) { self.envelope = envelope }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: WireKey.self)
        let (operation, arguments) = envelope.request.wire
        try c.encode(envelope.id, forKey: .id)
        try c.encode(operation, forKey: .op)
        if let arguments { try c.encode(arguments, forKey: .args) } else { try c.encode(NoArguments(), forKey: .args) }
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
            throw WireError(.malformed, "not a request object with a numeric \"id\" and a string \"op\"")
        }
        guard let op = Request.Operation(rawValue: name) else {
            throw WireError(.unknownOperation, "unknown operation \"\(name.prefix(64))\"", id: id)
        }
        do {
            envelope = RequestEnvelope(id: id, request: try Request(op, arguments: Request.Arguments(container: c)))
        } catch {
            throw WireError(
                .invalidArguments,
                "arguments of \(name) are malformed: \(RequestEnvelope.describe(error))",
                id: id
            )
        }
    }
}

extension RequestEnvelope {
    public func encoded(_ encoding: WireEncoding = .json) -> [UInt8] {
        switch encoding {
        case .json: Array(try! WireCoders.requestEncoder.encode(WireRequest(self)))
        case .binary: try! BinaryWire.encode(WireRequest(self))
        }
    }

    public static func decode(_ payload: [UInt8], _ encoding: WireEncoding = .json) throws(WireError) -> RequestEnvelope
    {
        do {
            switch encoding {
            case .json: return try WireCoders.requestDecoder.decode(WireRequest.self, from: Data(payload)).envelope
            case .binary: return try BinaryWire.decode(WireRequest.self, from: payload).envelope
            }
        } catch let e as WireError {
            throw e
        } catch {
            throw WireError(.malformed, "not a request object with a numeric \"id\" and a string \"op\"")
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
