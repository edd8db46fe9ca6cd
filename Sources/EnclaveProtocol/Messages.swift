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
    case promptInput(context: String, action: PromptAction, passcode: String?)
    case invalidate(context: String)
    case domainState(context: String?)
    case status
    case setPasscode(current: String?, new: String)
    case removePasscode(current: String)
    case enroll(passcode: String, name: String)
    case unenroll(passcode: String, name: String)
    case simulate(events: [SimulatedEvent])
    case clearSimulated
    /// The caller's audit entries; with the passcode, those of all the user's apps.
    case audit(limit: Int, passcode: String?)
    /// Clears the passcode-disabled state and its counters (root in system mode; the user in user mode).
    case resetPasscodeLockout(uid: UInt32?)
    /// Refuses biometrics until the passcode is entered, like Apple's remote-lock command.
    case remoteLock(uid: UInt32?)
    case keychainAdd(KeychainRequest)
    case keychainCopy(KeychainRequest)
    case keychainUpdate(KeychainRequest)
    case keychainDelete(KeychainRequest)
    /// Every item of the user, of every app (metadata only); needs the device passcode.
    case keychainList(passcode: String)
    /// Deletes any of the user's items by persistent reference; needs the device passcode.
    case keychainRemove(passcode: String, persistentRef: Data)
    /// A Secure Enclave key operation.
    case key(KeyRequest)
    /// Sets which apps (executable paths) share a keychain access group; no apps removes the
    /// group. Needs the device passcode: only the person decides what apps share.
    case configureAccessGroup(passcode: String, name: String, apps: [String])
    /// The user's access groups and their apps; needs the device passcode.
    case accessGroups(passcode: String)

    /// The operation's name on the wire.
    public var operation: Operation {
        switch self {
        case .hello: return .hello
        case .canEvaluate: return .canEvaluate
        case .evaluate: return .evaluate
        case .authorizeAccessControl: return .authorizeAccessControl
        case .promptInput: return .promptInput
        case .invalidate: return .invalidate
        case .domainState: return .domainState
        case .status: return .status
        case .setPasscode: return .setPasscode
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
        }
    }

    /// Every operation's wire name: the one list (decoding switches over it exhaustively).
    public enum Operation: String, Codable, Sendable, CaseIterable {
        case hello, canEvaluate, evaluate, authorizeAccessControl, promptInput, invalidate, domainState, status, setPasscode
        case removePasscode, enroll, unenroll, simulate, clearSimulated, audit, resetPasscodeLockout, remoteLock
        case keychainAdd, keychainCopy, keychainUpdate, keychainDelete, keychainList, keychainRemove, key, configureAccessGroup, accessGroups
    }

    public static var operations: Set<String> { Set(Operation.allCases.map(\.rawValue)) }
}

public struct EvaluationOptions: Codable, Sendable, Equatable {
    public var reason: String
    public var cancelTitle: String?
    public var fallbackTitle: String?
    public var reuseDuration: Double
    public var interactionNotAllowed: Bool
    /// True when the client shows the prompt itself (terminal presenter) and sends `promptInput`.
    public var clientPresents: Bool

    public init(reason: String, cancelTitle: String? = nil, fallbackTitle: String? = nil, reuseDuration: Double = 0,
                interactionNotAllowed: Bool = false, clientPresents: Bool = false) {
        self.reason = reason; self.cancelTitle = cancelTitle; self.fallbackTitle = fallbackTitle
        self.reuseDuration = reuseDuration; self.interactionNotAllowed = interactionNotAllowed
        self.clientPresents = clientPresents
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

private struct Header: Decodable { var id: UInt64; var op: String }

private struct Args: Codable {
    var version: Int?
    var context: String?
    var policy: Int?
    var options: EvaluationOptions?
    var action: PromptAction?
    var passcode: String?
    var current: String?
    var new: String?
    var name: String?
    var events: [SimulatedEvent]?
    var limit: Int?
    var uid: UInt32?
    var keychain: KeychainRequest?
    var persistentRef: Data?
    var key: KeyRequest?
    var apps: [String]?
    var flags: AccessControlFlags?
}

private struct WireRequest: Codable { var id: UInt64; var op: Request.Operation; var args: Args? }

extension RequestEnvelope {
    public func encoded() -> [UInt8] {
        var a = Args()
        switch request {
        case .hello(let v): a.version = v
        case .canEvaluate(let c, let p): a.context = c; a.policy = p
        case .evaluate(let c, let p, let o): a.context = c; a.policy = p; a.options = o
        case .authorizeAccessControl(let c, let f, let o): a.context = c; a.flags = f; a.options = o
        case .promptInput(let c, let action, let pass): a.context = c; a.action = action; a.passcode = pass
        case .invalidate(let c): a.context = c
        case .domainState(let c): a.context = c
        case .status, .clearSimulated: break
        case .setPasscode(let cur, let new): a.current = cur; a.new = new
        case .removePasscode(let cur): a.current = cur
        case .enroll(let p, let n), .unenroll(let p, let n): a.passcode = p; a.name = n
        case .simulate(let e): a.events = e
        case .audit(let l, let p): a.limit = l; a.passcode = p
        case .resetPasscodeLockout(let u), .remoteLock(let u): a.uid = u
        case .keychainAdd(let k), .keychainCopy(let k), .keychainUpdate(let k), .keychainDelete(let k): a.keychain = k
        case .keychainList(let p): a.passcode = p
        case .keychainRemove(let p, let r): a.passcode = p; a.persistentRef = r
        case .key(let k): a.key = k
        case .configureAccessGroup(let p, let n, let apps): a.passcode = p; a.name = n; a.apps = apps
        case .accessGroups(let p): a.passcode = p
        }
        return Array(try! JSONEncoder().encode(WireRequest(id: id, op: request.operation, args: a)))
    }

    public static func decode(_ payload: [UInt8]) throws -> RequestEnvelope {
        let data = Data(payload)
        let header: Header
        do { header = try JSONDecoder().decode(Header.self, from: data) } catch {
            throw RequestDecodingError(kind: .malformed, id: nil, detail: "not a request object with a numeric \"id\" and a string \"op\"")
        }
        guard let op = Request.Operation(rawValue: header.op) else {
            throw RequestDecodingError(kind: .unknownOperation, id: header.id, detail: "unknown operation \"\(header.op.prefix(64))\"")
        }
        let a: Args
        do { a = try JSONDecoder().decode(WireRequest.self, from: data).args ?? Args() } catch {
            throw RequestDecodingError(kind: .invalidArguments, id: header.id, detail: "arguments of \(header.op) are malformed: \(Self.describe(error))")
        }
        func need<T>(_ v: T?, _ name: String) throws -> T {
            guard let v else { throw RequestDecodingError(kind: .invalidArguments, id: header.id, detail: "\(header.op) needs \"\(name)\"") }
            return v
        }
        let r: Request
        switch op {
        case .hello: r = .hello(version: try need(a.version, "version"))
        case .canEvaluate: r = .canEvaluate(context: try need(a.context, "context"), policy: try need(a.policy, "policy"))
        case .evaluate: r = .evaluate(context: try need(a.context, "context"), policy: try need(a.policy, "policy"), options: try need(a.options, "options"))
        case .authorizeAccessControl: r = .authorizeAccessControl(context: try need(a.context, "context"), flags: try need(a.flags, "flags"), options: try need(a.options, "options"))
        case .promptInput: r = .promptInput(context: try need(a.context, "context"), action: try need(a.action, "action"), passcode: a.passcode)
        case .invalidate: r = .invalidate(context: try need(a.context, "context"))
        case .domainState: r = .domainState(context: a.context)
        case .status: r = .status
        case .setPasscode: r = .setPasscode(current: a.current, new: try need(a.new, "new"))
        case .removePasscode: r = .removePasscode(current: try need(a.current, "current"))
        case .enroll: r = .enroll(passcode: try need(a.passcode, "passcode"), name: try need(a.name, "name"))
        case .unenroll: r = .unenroll(passcode: try need(a.passcode, "passcode"), name: try need(a.name, "name"))
        case .simulate: r = .simulate(events: try need(a.events, "events"))
        case .clearSimulated: r = .clearSimulated
        case .audit: r = .audit(limit: a.limit ?? 50, passcode: a.passcode)
        case .resetPasscodeLockout: r = .resetPasscodeLockout(uid: a.uid)
        case .remoteLock: r = .remoteLock(uid: a.uid)
        case .keychainAdd: r = .keychainAdd(try need(a.keychain, "keychain"))
        case .keychainCopy: r = .keychainCopy(try need(a.keychain, "keychain"))
        case .keychainUpdate: r = .keychainUpdate(try need(a.keychain, "keychain"))
        case .keychainDelete: r = .keychainDelete(try need(a.keychain, "keychain"))
        case .keychainList: r = .keychainList(passcode: try need(a.passcode, "passcode"))
        case .key: r = .key(try need(a.key, "key"))
        case .configureAccessGroup: r = .configureAccessGroup(passcode: try need(a.passcode, "passcode"), name: try need(a.name, "name"), apps: try need(a.apps, "apps"))
        case .accessGroups: r = .accessGroups(passcode: try need(a.passcode, "passcode"))
        case .keychainRemove: r = .keychainRemove(passcode: try need(a.passcode, "passcode"), persistentRef: try need(a.persistentRef, "persistentRef"))
        }
        return RequestEnvelope(id: header.id, request: r)
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
    /// An enrolment's progress on a real reader, before its final `ok` (not final).
    case enrollProgress(EnrolmentProgress)
    case failure(Failure)

    public var isFinal: Bool {
        switch self {
        case .prompt, .enrollProgress: return false
        default: return true
        }
    }
}

public struct ReplyEnvelope: Codable, Sendable, Equatable {
    public var id: UInt64
    public var reply: Reply
    public init(id: UInt64, reply: Reply) { self.id = id; self.reply = reply }

    public func encoded() -> [UInt8] { Array(try! Self.encoder.encode(self)) }
    public static func decode(_ payload: [UInt8]) throws -> ReplyEnvelope { try JSONDecoder.enclave.decode(ReplyEnvelope.self, from: Data(payload)) }
    private static let encoder: JSONEncoder = { let e = JSONEncoder(); e.dateEncodingStrategy = .secondsSince1970; return e }()
}

extension JSONDecoder {
    static var enclave: JSONDecoder { let d = JSONDecoder(); d.dateDecodingStrategy = .secondsSince1970; return d }
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
        case "keychainListing": self = .keychainListing(try c.decode([KeychainListing].self, forKey: .value))
        case "enrollProgress": self = .enrollProgress(try c.decode(EnrolmentProgress.self, forKey: .value))
        case "failure": self = .failure(try c.decode(Failure.self, forKey: .value))
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
        case .evaluated(let v): try c.encode("evaluated", forKey: .kind); try c.encode(v, forKey: .value)
        case .domainState(let v): try c.encode("domainState", forKey: .kind); try c.encode(v, forKey: .value)
        case .status(let v): try c.encode("status", forKey: .kind); try c.encode(v, forKey: .value)
        case .audit(let v): try c.encode("audit", forKey: .kind); try c.encode(v, forKey: .value)
        case .keychain(let v): try c.encode("keychain", forKey: .kind); try c.encode(v, forKey: .value)
        case .keychainListing(let v): try c.encode("keychainListing", forKey: .kind); try c.encode(v, forKey: .value)
        case .key(let v): try c.encode("key", forKey: .kind); try c.encode(v, forKey: .value)
        case .accessGroups(let v): try c.encode("accessGroups", forKey: .kind); try c.encode(v, forKey: .value)
        case .failure(let v): try c.encode("failure", forKey: .kind); try c.encode(v, forKey: .value)
        }
    }
}
