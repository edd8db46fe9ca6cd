import Foundation

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
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }
    public var description: String { "\(code.rawValue): \(message)" }
}

public struct HelloReply: Codable, Sendable, Equatable {
    public var version: Int
    public var mode: DaemonMode
    public var uid: UInt32
    public var app: String
    /// The coding of every message after this one, both ways (`WireEncoding`; nil: JSON, as a
    /// daemon that predates the choice).
    public var encoding: String?
    public init(version: Int, mode: DaemonMode, uid: UInt32, app: String, encoding: String? = nil) {
        self.version = version
        self.mode = mode
        self.uid = uid
        self.app = app
        self.encoding = encoding
    }

    public var wireEncoding: WireEncoding { encoding.flatMap(WireEncoding.init(rawValue:)) ?? .json }
}

/// How a connection's messages are coded. `hello` and its answer are always JSON; the answer
/// names the coding of everything after it. JSON is readable by anything (the PAM module, a raw
/// client, a person); `binary` (`BinaryWire`) is what the Swift client asks for: the same types,
/// without text to write and parse.
public enum WireEncoding: String, Sendable, CaseIterable {
    case json
    /// `BinaryWire`. Named "binary2" since a keychain value travels as its tagged value alone
    /// (2026-11-30); a peer that offers only the first form, "binary", is answered in JSON.
    case binary = "binary2"
}

public struct CanEvaluateReply: Codable, Sendable, Equatable {
    public var biometryType: BiometryKind
    public var error: LAErrorCode?
    public var message: String?
    public var domainState: Data?
    public init(biometryType: BiometryKind, error: LAErrorCode?, message: String?, domainState: Data?) {
        self.biometryType = biometryType
        self.error = error
        self.message = message
        self.domainState = domainState
    }
}

public struct EvaluationResult: Codable, Sendable, Equatable {
    public var success: Bool
    public var error: LAErrorCode?
    public var message: String?
    public var biometryType: BiometryKind
    public var domainState: Data?
    public init(success: Bool, error: LAErrorCode?, message: String?, biometryType: BiometryKind, domainState: Data?) {
        self.success = success
        self.error = error
        self.message = message
        self.biometryType = biometryType
        self.domainState = domainState
    }
}

public struct DomainStateReply: Codable, Sendable, Equatable {
    public var biometryType: BiometryKind
    public var stateHash: Data?
    public init(biometryType: BiometryKind, stateHash: Data?) {
        self.biometryType = biometryType
        self.stateHash = stateHash
    }
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
    /// `pamAuthenticate`'s answer.
    case pamAuthenticated(PAMAuthenticationReply)
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
    public init(id: UInt64, reply: Reply) {
        self.id = id
        self.reply = reply
    }

    public func encoded(_ encoding: WireEncoding = .json) -> [UInt8] {
        switch encoding {
        case .json: Array(try! WireCoders.replyEncoder.encode(self))
        case .binary: try! BinaryWire.encode(self)
        }
    }

    public static func decode(_ payload: [UInt8], _ encoding: WireEncoding = .json) throws -> ReplyEnvelope {
        switch encoding {
        case .json: try WireCoders.replyDecoder.decode(ReplyEnvelope.self, from: Data(payload))
        case .binary: try BinaryWire.decode(ReplyEnvelope.self, from: payload)
        }
    }
}

/// The wire's JSON coders, made once: a coder is safe to share between threads, and making one
/// per message cost more than some messages' own coding.
enum WireCoders {
    static let requestEncoder = JSONEncoder()
    static let requestDecoder = JSONDecoder()
    /// Replies carry dates as seconds since 1970, both ways.
    static let replyEncoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .secondsSince1970
        return e
    }()
    static let replyDecoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .secondsSince1970
        return d
    }()
}

extension Reply: Codable {
    /// Every reply's wire name: `{"kind": …, "value": …}`.
    public enum Kind: String, Codable, Sendable, CaseIterable {
        case hello, ok, canEvaluate, prompt, evaluated, domainState, status, audit, keychain, keychainListing, key
        case accessGroups, enrolments, handoffTicket, enrollProgress, agentEvent, pamAuthenticated, failure
    }

    /// The reply's kind and its value as it travels (nil: none).
    public var wire: (kind: Kind, value: (any Encodable)?) {
        switch self {
        case .hello(let v): (.hello, v)
        case .ok: (.ok, nil)
        case .canEvaluate(let v): (.canEvaluate, v)
        case .prompt(let v): (.prompt, v)
        case .evaluated(let v): (.evaluated, v)
        case .domainState(let v): (.domainState, v)
        case .status(let v): (.status, v)
        case .audit(let v): (.audit, v)
        case .keychain(let v): (.keychain, v)
        case .keychainListing(let v): (.keychainListing, v)
        case .key(let v): (.key, v)
        case .accessGroups(let v): (.accessGroups, v)
        case .enrolments(let v): (.enrolments, v)
        case .handoffTicket(let v): (.handoffTicket, v)
        case .enrollProgress(let v): (.enrollProgress, v)
        case .agentEvent(let v): (.agentEvent, v)
        case .pamAuthenticated(let v): (.pamAuthenticated, v)
        case .failure(let v): (.failure, v)
        }
    }

    private enum K: String, CodingKey { case kind, value }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: K.self)
        let name = try c.decode(String.self, forKey: .kind)
        guard let kind = Kind(rawValue: name) else {
            throw DecodingError.dataCorruptedError(forKey: .kind, in: c, debugDescription: "unknown reply kind \(name)")
        }
        func value<T: Decodable>() throws -> T { try c.decode(T.self, forKey: .value) }
        switch kind {
        case .hello: self = .hello(try value())
        case .ok: self = .ok
        case .canEvaluate: self = .canEvaluate(try value())
        case .prompt: self = .prompt(try value())
        case .evaluated: self = .evaluated(try value())
        case .domainState: self = .domainState(try value())
        case .status: self = .status(try value())
        case .audit: self = .audit(try value())
        case .keychain: self = .keychain(try value())
        case .keychainListing: self = .keychainListing(try value())
        case .key: self = .key(try value())
        case .accessGroups: self = .accessGroups(try value())
        case .enrolments: self = .enrolments(try value())
        case .handoffTicket: self = .handoffTicket(try value())
        case .enrollProgress: self = .enrollProgress(try value())
        case .agentEvent: self = .agentEvent(try value())
        case .pamAuthenticated: self = .pamAuthenticated(try value())
        case .failure: self = .failure(try value())
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: K.self)
        let (kind, value) = wire
        try c.encode(kind, forKey: .kind)
        if let value { try c.encode(value, forKey: .value) }
    }
}
