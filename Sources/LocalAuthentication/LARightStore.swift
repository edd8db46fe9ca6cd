import EnclaveClient
import EnclaveProtocol
import Foundation

/// Why the right store refused. Our type where Apple documents no codes: it bridges to an `NSError`
/// in `NSOSStatusErrorDomain` with the keychain's status (rights are keychain items and enclave
/// keys), `errSecItemNotFound` for a missing right and `errSecUnimplemented` for what Linux lacks.
/// Authentication failures are `LAError`s, as Apple's.
public enum LARightStoreError: Error, Equatable, CustomStringConvertible, CustomNSError {
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

    public static var errorDomain: String { NSOSStatusErrorDomain }
    public var errorCode: Int {
        switch self {
        case .notFound: return Int(errSecItemNotFound)
        case .storage(let status, _): return Int(status)
        case .unsupported: return Int(errSecUnimplemented)
        }
    }
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: description] }
}

/// Persisted rights, each with a Secure Enclave key and an optional secret that are usable only
/// while the right is authorized. Stored as one keychain item per right (per app), whose access
/// control mirrors the right's requirement. Saving under an existing identifier replaces it (our choice).
public final class LARightStore: NSObject, Sendable {
    public static let shared = LARightStore()
    private override init() {}

    static let service = KeyHoldingItems.rightStoreService

    struct Record: Codable {
        var requirement: LAAuthenticationRequirement.Kind
        var keyBlob: Data
        var publicKey: Data
        var hasSecret: Bool
        var enrolment: Data?
        /// nil: a right saved before rights' keys were `general` (signing only).
        var keyKind: KeyRequest.Kind?
    }

    private func keychain(
        _ op: KeychainOperation,
        _ attributes: [String: KeychainValue],
        accessControl: AccessControlValue? = nil,
        returnAttributes: Bool = false,
        matchAll: Bool = false,
        heldKey: Data? = nil
    ) async -> KeychainReply {
        var request = KeychainRequest(
            attributes: attributes,
            accessControl: accessControl,
            context: "",
            returnAttributes: returnAttributes,
            matchAll: matchAll,
            heldKey: heldKey
        )
        request.interactionNotAllowed = true
        return await ContextRequests.performKeychain(op, request, context: nil)
    }

    /// Rights live in the app's own access group only: never in (or read from) a shared one.
    private func identity(_ identifier: String) -> [String: KeychainValue] {
        var a: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string(Self.service), "acct": .string(identifier),
        ]
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
        let key = await ContextRequests.performKeyOperation(
            KeyRequest(
                operation: .create,
                kind: .general,
                accessControl: AccessControlValue(protection: .whenUnlockedThisDeviceOnly, flags: flags),
                context: ""
            ),
            context: nil
        )
        guard key.problem == nil, let blob = key.blob, let publicKey = key.publicKey else {
            throw LARightStoreError.storage(
                KeychainStatus.notAvailable.rawValue,
                key.message ?? "the enclave made no key"
            )
        }
        let enrolment =
            right.requirement.kind == .biometryCurrentSet
            ? await LAContext().currentDomainState().biometry.stateHash : nil
        let record = Record(
            requirement: right.requirement.kind,
            keyBlob: blob,
            publicKey: publicKey,
            hasSecret: secret != nil,
            enrolment: enrolment,
            keyKind: .general
        )
        var attributes = identity(identifier)
        attributes["gena"] = .data(try JSONEncoder().encode(record))
        attributes["v_Data"] = .data(secret ?? Data())
        _ = await keychain(.delete, identity(identifier))
        // The right's item holds its key: removing the right deletes the key, and every copy of it.
        let added = await keychain(
            .add,
            attributes,
            accessControl: AccessControlValue(
                protection: .whenUnlockedThisDeviceOnly,
                flags: flags.subtracting(.privateKeyUsage)
            ),
            heldKey: blob
        )
        guard added.status == KeychainStatus.success else {
            throw LARightStoreError.storage(added.status.rawValue, added.message ?? "")
        }
        return LAPersistedRight(identifier: identifier, record: record)
    }

    public func right(forIdentifier identifier: String) async throws -> LAPersistedRight {
        let found = await keychain(.copy, identity(identifier), returnAttributes: true)
        guard found.status == KeychainStatus.success, let item = found.items.first else {
            if found.status == KeychainStatus.itemNotFound { throw LARightStoreError.notFound(identifier) }
            throw LARightStoreError.storage(found.status.rawValue, found.message ?? "")
        }
        guard case .data(let json)? = item.attributes["gena"],
            let record = try? JSONDecoder().decode(Record.self, from: json)
        else {
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
        guard reply.status == KeychainStatus.success else {
            throw LARightStoreError.storage(reply.status.rawValue, reply.message ?? "")
        }
    }

    /// Removes every right this app stored.
    @preconcurrency public func right(
        forIdentifier identifier: String,
        completion: @escaping @Sendable (LAPersistedRight?, (any Error)?) -> Void
    ) {
        deliver(completion) { try await self.right(forIdentifier: identifier) }
    }

    @preconcurrency public func saveRight(
        _ right: LARight,
        identifier: String,
        completion: @escaping @Sendable (LAPersistedRight?, (any Error)?) -> Void
    ) {
        deliver(completion) { try await self.saveRight(right, identifier: identifier) }
    }

    @preconcurrency public func saveRight(
        _ right: LARight,
        identifier: String,
        secret: Data,
        completion: @escaping @Sendable (LAPersistedRight?, (any Error)?) -> Void
    ) {
        deliver(completion) { try await self.saveRight(right, identifier: identifier, secret: secret) }
    }

    @preconcurrency public func removeRight(
        _ right: LAPersistedRight,
        completion: @escaping @Sendable ((any Error)?) -> Void
    ) {
        deliver(completion) { try await self.removeRight(right) }
    }

    @preconcurrency public func removeRight(
        forIdentifier identifier: String,
        completion: @escaping @Sendable ((any Error)?) -> Void
    ) {
        deliver(completion) { try await self.removeRight(forIdentifier: identifier) }
    }

    @preconcurrency public func removeAllRights(completion: @escaping @Sendable ((any Error)?) -> Void) {
        deliver(completion) { try await self.removeAllRights() }
    }

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
///
/// Unchecked: a subclass of Apple's `open class LARight` (see there); `key` and `secret` are set
/// once, in `init`, before the right is handed to anyone.
public final class LAPersistedRight: LARight, @unchecked Sendable {
    let identifier: String
    public private(set) var key: LAPrivateKey!
    public private(set) var secret: LASecret!

    init(identifier: String, record: LARightStore.Record) {
        self.identifier = identifier
        super.init(requirement: LAAuthenticationRequirement(record.requirement), enrolment: record.enrolment)
        key = LAPrivateKey(
            blob: record.keyBlob,
            publicKey: record.publicKey,
            kind: record.keyKind ?? .signing,
            right: self
        )
        secret = LASecret(identifier: identifier, present: record.hasSecret, right: self)
    }
}

/// Apple's completion-handler twin of an async call that answers nothing: `completion` gets nil
/// or the error.
func deliver(
    _ completion: @escaping @Sendable ((any Error)?) -> Void,
    _ body: @escaping @Sendable () async throws -> Void
) {
    Task {
        do {
            try await body()
            completion(nil)
        } catch { completion(error) }
    }
}

/// Apple's completion-handler twin of an async call: `completion` gets the value or the error.
func deliver<T: Sendable>(
    _ completion: @escaping @Sendable (T?, (any Error)?) -> Void,
    _ body: @escaping @Sendable () async throws -> T
) {
    Task {
        do { completion(try await body(), nil) } catch { completion(nil, error) }
    }
}

/// A value Swift cannot prove `Sendable` (Apple's `[AnyHashable: Any]` parameters) that is only
/// read once handed over. Unchecked: the caller's dictionary is copied in and never written again.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// The secret stored with a persisted right: readable only while the right is authorized.
public final class LASecret: NSObject, Sendable {
    let identifier: String
    let present: Bool
    private weak let right: LARight?
    init(identifier: String, present: Bool, right: LARight) {
        self.identifier = identifier
        self.present = present
        self.right = right
    }

    @preconcurrency public func loadData(completion: @escaping @Sendable (Data?, (any Error)?) -> Void) {
        deliver(completion) { try await self.rawData }
    }

    public var rawData: Data {
        get async throws {
            guard let right else { throw LAError(.invalidContext) }
            try right.requireAuthorized()
            guard present else { throw LARightStoreError.notFound("a secret for \(identifier)") }
            var attributes: [String: KeychainValue] = [
                "class": .string("genp"), "svce": .string(LARightStore.service), "acct": .string(identifier),
            ]
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
