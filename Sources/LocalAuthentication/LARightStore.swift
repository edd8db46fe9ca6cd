import EnclaveClient
import EnclaveProtocol
import Foundation

public enum LARightStoreError: Error, Equatable, CustomStringConvertible {
    /// No right is stored under the identifier (for this app).
    case notFound(String)
    /// The keychain or the enclave refused (status and message).
    case storage(Int32, String)
    /// The operation is not available for these rights on Linux (see the doc comment).
    case unsupported(String)
    public var description: String {
        switch self {
        case .notFound(let id): return "no right is stored under \"\(id)\""
        case .storage(let status, let message): return "the right store failed (\(status)): \(message)"
        case .unsupported(let what): return what
        }
    }
}

/// Persisted rights, each with a Secure Enclave key and an optional secret that are usable only
/// while the right is authorized. Stored as one keychain item per right (per app), whose access
/// control mirrors the right's requirement. Saving under an existing identifier replaces it (our choice).
public final class LARightStore: NSObject, @unchecked Sendable {
    public static let shared = LARightStore()
    private override init() {}

    static let service = "LocalAuthentication.LARightStore"

    struct Record: Codable {
        var requirement: LAAuthenticationRequirement.Kind
        var keyBlob: Data
        var publicKey: Data
        var hasSecret: Bool
        var enrolment: Data?
    }

    private func keychain(_ op: KeychainOperation, _ attributes: [String: KeychainValue], accessControl: AccessControlValue? = nil,
                          returnAttributes: Bool = false, matchAll: Bool = false) async -> KeychainReply {
        var request = KeychainRequest(attributes: attributes, accessControl: accessControl, context: "", returnAttributes: returnAttributes, matchAll: matchAll)
        request.interactionNotAllowed = true
        return await ContextRequests.performKeychain(op, request, context: nil)
    }

    /// Rights live in the app's own access group only: never in (or read from) a shared one.
    private func identity(_ identifier: String) -> [String: KeychainValue] {
        var a: [String: KeychainValue] = ["class": .string("genp"), "svce": .string(Self.service), "acct": .string(identifier)]
        if let app = Self.ownGroup() { a["agrp"] = .string(app) }
        return a
    }

    /// The app's identity as the daemon knows it (its own access group).
    static func ownGroup() -> String? { (try? EnclaveConnections.shared(for: .resolve()))?.hello.app }

    public func saveRight(_ right: LARight, identifier: String) async throws -> LAPersistedRight {
        try await save(right, identifier: identifier, secret: nil)
    }

    public func saveRight(_ right: LARight, identifier: String, secret: Data) async throws -> LAPersistedRight {
        try await save(right, identifier: identifier, secret: secret)
    }

    private func save(_ right: LARight, identifier: String, secret: Data?) async throws -> LAPersistedRight {
        let flags = right.requirement.accessControlFlags
        let key = await ContextRequests.performKeyOperation(KeyRequest(operation: .create, kind: .signing,
                                                            accessControl: AccessControlValue(protection: .whenUnlockedThisDeviceOnly, flags: flags), context: ""), context: nil)
        guard key.problem == nil, let blob = key.blob, let publicKey = key.publicKey else {
            throw LARightStoreError.storage(KeychainStatus.notAvailable.rawValue, key.message ?? "the enclave made no key")
        }
        let enrolment = right.requirement.kind == .biometryCurrentSet ? await LAContext().currentDomainState().biometry.stateHash : nil
        let record = Record(requirement: right.requirement.kind, keyBlob: blob, publicKey: publicKey, hasSecret: secret != nil, enrolment: enrolment)
        var attributes = identity(identifier)
        attributes["gena"] = .data(try JSONEncoder().encode(record))
        attributes["v_Data"] = .data(secret ?? Data())
        _ = await keychain(.delete, identity(identifier))
        let added = await keychain(.add, attributes, accessControl: AccessControlValue(protection: .whenUnlockedThisDeviceOnly, flags: flags.subtracting(.privateKeyUsage)))
        guard added.status == KeychainStatus.success else { throw LARightStoreError.storage(added.status.rawValue, added.message ?? "") }
        return LAPersistedRight(identifier: identifier, record: record)
    }

    public func right(forIdentifier identifier: String) async throws -> LAPersistedRight {
        let found = await keychain(.copy, identity(identifier), returnAttributes: true)
        guard found.status == KeychainStatus.success, let item = found.items.first else {
            if found.status == KeychainStatus.itemNotFound { throw LARightStoreError.notFound(identifier) }
            throw LARightStoreError.storage(found.status.rawValue, found.message ?? "")
        }
        guard case .data(let json)? = item.attributes["gena"], let record = try? JSONDecoder().decode(Record.self, from: json) else {
            throw LARightStoreError.storage(KeychainStatus.decode.rawValue, "the stored right is damaged")
        }
        return LAPersistedRight(identifier: identifier, record: record)
    }

    public func removeRight(_ right: LAPersistedRight) async throws {
        try await removeRight(forIdentifier: right.identifier)
    }

    public func removeRight(forIdentifier identifier: String) async throws {
        let reply = await keychain(.delete, identity(identifier))
        if reply.status == KeychainStatus.itemNotFound { throw LARightStoreError.notFound(identifier) }
        guard reply.status == KeychainStatus.success else { throw LARightStoreError.storage(reply.status.rawValue, reply.message ?? "") }
    }

    /// Removes every right this app stored.
    public func removeAllRights() async throws {
        var all: [String: KeychainValue] = ["class": .string("genp"), "svce": .string(Self.service)]
        if let app = Self.ownGroup() { all["agrp"] = .string(app) }
        let reply = await keychain(.delete, all)
        guard reply.status == KeychainStatus.success || reply.status == KeychainStatus.itemNotFound else {
            throw LARightStoreError.storage(reply.status.rawValue, reply.message ?? "")
        }
    }
}

/// A right from `LARightStore`: authorize it, then use its key and secret without another prompt.
public final class LAPersistedRight: LARight, @unchecked Sendable {
    let identifier: String
    public private(set) var key: LAPrivateKey!
    public private(set) var secret: LASecret!

    init(identifier: String, record: LARightStore.Record) {
        self.identifier = identifier
        super.init(requirement: LAAuthenticationRequirement(record.requirement), enrolment: record.enrolment)
        key = LAPrivateKey(blob: record.keyBlob, publicKey: record.publicKey, right: self)
        secret = LASecret(identifier: identifier, present: record.hasSecret, right: self)
    }
}

/// The private key of a persisted right: private-key operations need the right authorized.
/// Our choice: an ECDSA P-256 signing key; decryption and key exchange are not offered
/// (`canDecrypt`/`canExchangeKeys` answer false).
public final class LAPrivateKey: NSObject, @unchecked Sendable {
    let blob: Data
    public let publicKey: LAPublicKey
    private weak var right: LARight?

    init(blob: Data, publicKey: Data, right: LARight) {
        self.blob = blob
        self.publicKey = LAPublicKey(blob: blob, bytes: publicKey)
        self.right = right
    }

    public func canSign(using algorithm: SecKeyAlgorithm) -> Bool {
        algorithm == .ecdsaSignatureMessageX962SHA256 || algorithm == .ecdsaSignatureDigestX962SHA256
    }

    /// An X9.62 (DER) ECDSA signature, as SecKeyCreateSignature gives it.
    public func sign(_ data: Data, algorithm: SecKeyAlgorithm) async throws -> Data {
        guard let right else { throw LAError(.invalidContext) }
        try right.requireAuthorized()
        guard canSign(using: algorithm) else { throw LARightStoreError.unsupported("\(algorithm.rawValue) is not supported; use ecdsaSignatureMessageX962SHA256") }
        let digest = algorithm == .ecdsaSignatureDigestX962SHA256
        let reply = await ContextRequests.performKeyOperation(KeyRequest(operation: .sign, kind: .signing, blob: blob, digest: digest ? data : nil,
                                                              message: digest ? nil : data, context: ""), context: right.context)
        guard reply.problem == nil, let der = reply.signatureDER else {
            if let code = reply.authenticationError { throw LAError(LAError.Code(rawValue: code.rawValue) ?? .authenticationFailed, message: reply.message) }
            throw LARightStoreError.storage(KeychainStatus.authFailed.rawValue, reply.message ?? "the key could not sign")
        }
        return der
    }

    public func canDecrypt(using algorithm: SecKeyAlgorithm) -> Bool { false }
    public func decrypt(_ data: Data, algorithm: SecKeyAlgorithm) async throws -> Data {
        throw LARightStoreError.unsupported("a right's key decrypts nothing on Linux yet")
    }
    public func canExchangeKeys(using algorithm: SecKeyAlgorithm) -> Bool { false }
    public func exchangeKeys(publicKey: Data, algorithm: SecKeyAlgorithm, parameters: [AnyHashable: Any]) async throws -> Data {
        throw LARightStoreError.unsupported("a right's key is a signing key; key exchange is not offered on Linux yet")
    }
}

/// The public key of a persisted right: usable whether or not the right is authorized.
public final class LAPublicKey: NSObject, @unchecked Sendable {
    let blob: Data
    private let raw: Data
    init(blob: Data, bytes: Data) { self.blob = blob; raw = bytes }

    /// The key in X9.63 form (04 ‖ x ‖ y), as SecKeyCopyExternalRepresentation gives it.
    public var bytes: Data { get async throws { raw } }

    public func canVerify(using algorithm: SecKeyAlgorithm) -> Bool {
        algorithm == .ecdsaSignatureMessageX962SHA256 || algorithm == .ecdsaSignatureDigestX962SHA256
    }

    /// Throws when the signature does not verify.
    public func verify(_ signedData: Data, signature: Data, algorithm: SecKeyAlgorithm) async throws {
        guard canVerify(using: algorithm) else { throw LARightStoreError.unsupported("\(algorithm.rawValue) is not supported") }
        let digest = algorithm == .ecdsaSignatureDigestX962SHA256
        let reply = await ContextRequests.performKeyOperation(KeyRequest(operation: .verify, kind: .signing, blob: blob, digest: digest ? signedData : nil,
                                                              message: digest ? nil : signedData, signature: signature, context: ""), context: nil)
        guard reply.valid == true else { throw LAError(.authenticationFailed, message: reply.message ?? "The signature does not verify.") }
    }

    public func canEncrypt(using algorithm: SecKeyAlgorithm) -> Bool { false }
    public func encrypt(_ data: Data, algorithm: SecKeyAlgorithm) async throws -> Data {
        throw LARightStoreError.unsupported("a right's key encrypts nothing on Linux yet")
    }
}

/// The secret stored with a persisted right: readable only while the right is authorized.
public final class LASecret: NSObject, @unchecked Sendable {
    let identifier: String
    let present: Bool
    private weak var right: LARight?
    init(identifier: String, present: Bool, right: LARight) { self.identifier = identifier; self.present = present; self.right = right }

    public var rawData: Data {
        get async throws {
            guard let right else { throw LAError(.invalidContext) }
            try right.requireAuthorized()
            guard present else { throw LARightStoreError.notFound("a secret for \(identifier)") }
            var attributes: [String: KeychainValue] = ["class": .string("genp"), "svce": .string(LARightStore.service), "acct": .string(identifier)]
            if let app = LARightStore.ownGroup() { attributes["agrp"] = .string(app) }
            var request = KeychainRequest(attributes: attributes, context: "", returnData: true)
            request.interactionNotAllowed = true
            let reply = await ContextRequests.performKeychain(.copy, request, context: right.context)
            guard reply.status == KeychainStatus.success, let data = reply.items.first?.data else {
                throw LARightStoreError.storage(reply.status.rawValue, reply.message ?? "")
            }
            return data
        }
    }
}
