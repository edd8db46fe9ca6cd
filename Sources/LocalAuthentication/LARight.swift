import EnclaveClient
import EnclaveProtocol
import Foundation

/// What an `LARight` demands of the person.
public final class LAAuthenticationRequirement: NSObject, Sendable {
    enum Kind: String, Codable { case `default`, biometry, biometryCurrentSet, biometryOrPasscode }
    let kind: Kind
    init(_ kind: Kind) { self.kind = kind }

    /// Biometrics or the device passcode.
    public static var `default`: LAAuthenticationRequirement { LAAuthenticationRequirement(.default) }
    /// Biometrics only; fails without a sensor or enrolment.
    public static var biometry: LAAuthenticationRequirement { LAAuthenticationRequirement(.biometry) }
    /// Biometrics only, and fails once the enrolled set changed since the right was made.
    public static var biometryCurrentSet: LAAuthenticationRequirement {
        LAAuthenticationRequirement(.biometryCurrentSet)
    }
    /// Biometrics, or the fallback when biometrics fail or are unavailable. Both fallbacks are the
    /// device passcode here (our choice for `.default`).
    public static func biometry(fallback: LABiometryFallbackRequirement) -> LAAuthenticationRequirement {
        LAAuthenticationRequirement(.biometryOrPasscode)
    }

    var policy: LAPolicy {
        kind == .default || kind == .biometryOrPasscode
            ? .deviceOwnerAuthentication : .deviceOwnerAuthenticationWithBiometrics
    }

    /// The `SecAccessControlCreateFlags` raw value a persisted right's key and secret carry.
    var accessControlFlags: AccessControlFlags {
        switch kind {
        case .default: return [.userPresence, .privateKeyUsage]
        case .biometry: return [.biometryAny, .privateKeyUsage]
        case .biometryCurrentSet: return [.biometryCurrentSet, .privateKeyUsage]
        case .biometryOrPasscode: return [.biometryAny, .or, .devicePasscode, .privateKeyUsage]
        }
    }
}

public final class LABiometryFallbackRequirement: NSObject, Sendable {
    public static var `default`: LABiometryFallbackRequirement { LABiometryFallbackRequirement() }
    public static var devicePasscode: LABiometryFallbackRequirement { LABiometryFallbackRequirement() }
}

/// A grouped authorization: authorize once, then act. `LARightStore` persists rights with a key and
/// a secret that are usable only while the right is authorized.
///
/// Unchecked: Apple's shape is an `open class` (a non-final class cannot be checked); its mutable
/// state is behind `lock`.
open class LARight: NSObject, @unchecked Sendable {
    public enum State: Int, Sendable {
        case unknown = 0
        case authorizing = 1
        case authorized = 2
        case notAuthorized = 3
    }

    let requirement: LAAuthenticationRequirement
    private let lock = NSLock()
    private var _state: State = .unknown
    private var _context = LAContext()
    /// For `.biometryCurrentSet`: the enrolment this right was made with.
    private let enrolment: Data?
    public var tag: Int = 0

    public override convenience init() { self.init(requirement: .default) }

    public init(requirement: LAAuthenticationRequirement) {
        self.requirement = requirement
        enrolment = requirement.kind == .biometryCurrentSet ? LAContext().domainState.biometry.stateHash : nil
        super.init()
    }

    /// A persisted right carries the enrolment it was saved with.
    init(requirement: LAAuthenticationRequirement, enrolment: Data?) {
        self.requirement = requirement
        self.enrolment = enrolment
        super.init()
    }

    public var state: State { lock.withLock { _state } }

    /// The context that carries this right's authorization to its key and secret operations.
    var context: LAContext { lock.withLock { _context } }

    public func authorize(localizedReason: String) async throws {
        let context = lock.withLock { () -> LAContext in
            _state = .authorizing
            return _context
        }
        do {
            try await context.evaluatePolicy(requirement.policy, localizedReason: localizedReason)
            if requirement.kind == .biometryCurrentSet,
                await enrolment != context.currentDomainState().biometry.stateHash
            {
                throw LAError(
                    .authenticationFailed,
                    userInfo: [
                        NSLocalizedDescriptionKey: "The enrolled identities changed since this right was created."
                    ]
                )
            }
            lock.withLock { _state = .authorized }
        } catch {
            lock.withLock { _state = .notAuthorized }
            throw error
        }
    }

    @preconcurrency public func authorize(
        localizedReason: String,
        completion: @escaping @Sendable ((any Error)?) -> Void
    ) {
        deliver(completion) { try await self.authorize(localizedReason: localizedReason) }
    }

    /// Throws the reason the right cannot be authorized now; returns when it can.
    public func checkCanAuthorize() async throws {
        if let problem = await context.canEvaluate(requirement.policy) { throw problem }
        if requirement.kind == .biometryCurrentSet, await enrolment != context.currentDomainState().biometry.stateHash {
            throw LAError(
                .authenticationFailed,
                userInfo: [NSLocalizedDescriptionKey: "The enrolled identities changed since this right was created."]
            )
        }
    }

    @preconcurrency public func checkCanAuthorize(completion: @escaping @Sendable ((any Error)?) -> Void) {
        deliver(completion) { try await self.checkCanAuthorize() }
    }

    /// Ends the authorization; the next use needs `authorize` again.
    public func deauthorize() async {
        lock.withLock {
            _context.invalidate()
            _context = LAContext()
            _state = .notAuthorized
        }
    }

    @preconcurrency public func deauthorize(completion: @escaping @Sendable () -> Void) {
        Task {
            await deauthorize()
            completion()
        }
    }

    func requireAuthorized() throws {
        guard state == .authorized else {
            throw LAError(
                .authenticationFailed,
                userInfo: [
                    NSLocalizedDescriptionKey: "The right is not authorized; call authorize(localizedReason:) first."
                ]
            )
        }
    }
}
