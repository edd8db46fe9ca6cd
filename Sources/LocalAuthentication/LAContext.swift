import EnclaveClient
import EnclaveProtocol
import Foundation

/// A mechanism for evaluating authentication policies and access controls — Apple's `LAContext`,
/// backed by laenclaved. Every decision is the daemon's; this object carries the app's options
/// and presents the prompt when the process has a terminal.
///
/// Our choices where Apple is silent or the platform differs:
/// - An empty `localizedReason` fails the evaluation with `authenticationFailed` and a message
///   naming the parameter (Apple raises an exception).
/// - When laenclaved cannot be reached, `canEvaluatePolicy` and `evaluatePolicy` fail with
///   `systemCancel` and a message saying so.
/// - A context's authorization lives in the daemon and ends with the process, `invalidate()`,
///   or after the daemon's context lifetime (300 s by default).
///
/// Unchecked: Apple's shape is an `open class` (a non-final class cannot be checked); its
/// properties are behind `lock` and a running evaluation's state is `ContextCore`'s, which is checked.
open class LAContext: NSObject, @unchecked Sendable {
    package let core: ContextCore
    private let lock = NSLock()
    private var _localizedFallbackTitle: String?
    private var _localizedCancelTitle: String?
    private var _localizedReason = ""
    private var _reuseDuration: TimeInterval = 0
    private var _interactionNotAllowed = false
    private var _biometryType: LABiometryType = .none
    private var _evaluatedPolicyDomainState: Data?
    private var _maxBiometryFailures: NSNumber?

    public override init() {
        core = ContextCore(endpoint: EnclaveEndpoint.resolve())
        super.init()
    }

    deinit { core.invalidate() }

    // MARK: Properties

    /// Title of the fallback button; nil shows the default ("Enter Password"), "" hides the button.
    open var localizedFallbackTitle: String? {
        get { lock.withLock { _localizedFallbackTitle } }
        set { lock.withLock { _localizedFallbackTitle = newValue } }
    }

    /// Title of the cancel button; nil or "" shows "Cancel".
    open var localizedCancelTitle: String? {
        get { lock.withLock { _localizedCancelTitle } }
        set { lock.withLock { _localizedCancelTitle = newValue } }
    }

    /// The reason used when an operation gives none (keychain calls given this context).
    open var localizedReason: String {
        get { lock.withLock { _localizedReason } }
        set { lock.withLock { _localizedReason = newValue } }
    }

    /// Seconds after a successful biometric match during which a biometric evaluation succeeds
    /// without a prompt. 0 (the default) disables reuse; values above 300 act as 300. Our choice:
    /// any successful match through the daemon counts, as Apple counts a device unlock.
    open var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { lock.withLock { _reuseDuration } }
        set { lock.withLock { _reuseDuration = newValue } }
    }

    /// When true, an evaluation that would need a prompt fails at once with `notInteractive`.
    open var interactionNotAllowed: Bool {
        get { lock.withLock { _interactionNotAllowed } }
        set { lock.withLock { _interactionNotAllowed = newValue } }
    }

    /// Deprecated by Apple; setting it has no effect.
    @available(*, deprecated, message: "No longer supported")
    open var maxBiometryFailures: NSNumber? {
        get { lock.withLock { _maxBiometryFailures } }
        set { lock.withLock { _maxBiometryFailures = newValue } }
    }

    /// The sensor type; `.none` until `canEvaluatePolicy` has been called, as on Apple platforms.
    open var biometryType: LABiometryType { lock.withLock { _biometryType } }

    /// Set by a successful biometric `canEvaluatePolicy` or a successful biometric evaluation.
    @available(*, deprecated, message: "Use domainState.biometry.stateHash")
    open var evaluatedPolicyDomainState: Data? { lock.withLock { _evaluatedPolicyDomainState } }

    /// The current domain state for this app, read from the daemon.
    open var domainState: LADomainState {
        Self.domainState(
            from: (try? core.connection()).flatMap { try? $0.request(.domainState(.init(context: core.id))) }
        )
    }

    /// `domainState` for async callers, without holding a thread while the daemon answers.
    func currentDomainState() async -> LADomainState {
        guard let connection = try? core.connection() else { return Self.domainState(from: nil) }
        return Self.domainState(from: try? await connection.request(.domainState(.init(context: core.id))))
    }

    private static func domainState(from reply: Reply?) -> LADomainState {
        guard case .domainState(let reply)? = reply else {
            return LADomainState(biometry: LADomainStateBiometry(biometryType: .none, stateHash: nil))
        }
        return LADomainState(
            biometry: LADomainStateBiometry(
                biometryType: LABiometryType(rawValue: reply.biometryType.rawValue) ?? .none,
                stateHash: reply.stateHash
            )
        )
    }

    // MARK: Policies

    /// Whether `policy` can be evaluated now. Does not throw: the reason comes back through `error`.
    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        let problem: LAError?
        if core.isInvalidated {
            problem = LAError(.invalidContext)
        } else {
            problem = absorb(
                Result {
                    try core.connection().request(.canEvaluate(.init(context: core.id, policy: policy.rawValue)))
                },
                policy: policy
            )
        }
        if let problem { error?.pointee = problem.nsError }
        return problem == nil
    }

    /// `canEvaluatePolicy` for async callers, without holding a thread while the daemon answers.
    func canEvaluate(_ policy: LAPolicy) async -> LAError? {
        if core.isInvalidated { return LAError(.invalidContext) }
        let reply: Result<Reply, any Error>
        do {
            reply = .success(
                try await core.connection().request(.canEvaluate(.init(context: core.id, policy: policy.rawValue)))
            )
        } catch { reply = .failure(error) }
        return absorb(reply, policy: policy)
    }

    /// Takes what a `canEvaluate` answer says about the device (biometry type, domain state);
    /// returns why the policy cannot be evaluated, or nil.
    private func absorb(_ answer: Result<Reply, any Error>, policy: LAPolicy) -> LAError? {
        let reply: CanEvaluateReply
        switch answer {
        case .success(.canEvaluate(let r)): reply = r
        case .success(.failure(let f)): return LAError(.systemCancel, message: f.message)
        case .success(let other): return LAError(.systemCancel, message: "unexpected reply \(other)")
        case .failure(let error): return LAError(.systemCancel, message: "\(error)")
        }
        lock.withLock {
            _biometryType = LABiometryType(rawValue: reply.biometryType.rawValue) ?? .none
            if reply.error == nil, policy == .deviceOwnerAuthenticationWithBiometrics {
                _evaluatedPolicyDomainState = reply.domainState
            }
        }
        if let code = reply.error {
            return LAError(LAError.Code(rawValue: code.rawValue) ?? .systemCancel, message: reply.message)
        }
        return nil
    }

    /// Evaluates `policy`, showing the prompt with `localizedReason`. `reply` runs on a private queue.
    @preconcurrency open func evaluatePolicy(
        _ policy: LAPolicy,
        localizedReason: String,
        reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        evaluate(policy, localizedReason: localizedReason, onReplyQueue: true, reply: reply)
    }

    /// Evaluates `policy`; returns true or throws an `LAError`. The task resumes from the thread
    /// that read the daemon's answer, with no queue between. A subclass that overrides the
    /// callback form is called through it, as Apple's async form calls the callback method.
    @discardableResult
    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        let overridden = type(of: self) != LAContext.self
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
            let reply: @Sendable (Bool, (any Error)?) -> Void = { success, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: success) }
            }
            if overridden {
                evaluatePolicy(policy, localizedReason: localizedReason, reply: reply)
            } else {
                evaluate(policy, localizedReason: localizedReason, onReplyQueue: false, reply: reply)
            }
        }
    }

    private func evaluate(
        _ policy: LAPolicy,
        localizedReason: String,
        onReplyQueue: Bool,
        reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        let options: EvaluationOptions = lock.withLock {
            EvaluationOptions(
                reason: localizedReason,
                cancelTitle: _localizedCancelTitle,
                fallbackTitle: _localizedFallbackTitle,
                reuseDuration: _reuseDuration,
                interactionNotAllowed: _interactionNotAllowed
            )
        }
        core.evaluate(policy: policy.rawValue, options: options, onReplyQueue: onReplyQueue) {
            [weak self] success, error, domainState in
            if success, let domainState { self?.lock.withLock { self?._evaluatedPolicyDomainState = domainState } }
            reply(success, error)
        }
    }

    /// Evaluates an access control (the flags of a `SecAccessControl`) for an operation, so the
    /// keychain and key calls given this context afterwards do not prompt again. The daemon reads
    /// the flags (the same rules as for keychain items) and runs each constraint on this context.
    /// Our choice: the operation does not change what is asked.
    func evaluateAccessControlFlags(
        _ flags: AccessControlFlags,
        operation: LAAccessControlOperation,
        localizedReason: String
    ) async throws -> Bool {
        let options: EvaluationOptions = lock.withLock {
            EvaluationOptions(
                reason: localizedReason,
                cancelTitle: _localizedCancelTitle,
                fallbackTitle: _localizedFallbackTitle,
                reuseDuration: _reuseDuration,
                interactionNotAllowed: _interactionNotAllowed
            )
        }
        let id = core.id
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
            core.evaluate(
                options: options,
                onReplyQueue: false,
                request: { .authorizeAccessControl(.init(context: id, flags: flags, options: $0)) }
            ) { success, error, _ in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: success) }
            }
        }
    }

    /// Ends a running evaluation with `appCancel`; every later call fails with `invalidContext`.
    open func invalidate() { core.invalidate() }

    // MARK: Credentials

    private var credentials: [LACredentialType: Data] = [:]

    /// Binds an app-provided credential (the application password of keychain items). Our choice:
    /// it stays in this process until used by a keychain call; nil removes it.
    @discardableResult
    open func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        if core.isInvalidated { return false }
        lock.withLock { credentials[type] = credential }
        return true
    }

    open func isCredentialSet(_ type: LACredentialType) -> Bool {
        lock.withLock { credentials[type] != nil }
    }

    func credential(_ type: LACredentialType) -> Data? { lock.withLock { credentials[type] } }
}

extension LAContext: RequestContext {
    package var applicationPassword: Data? { credential(.applicationPassword) }
}

extension ContextCore {
    func evaluate(
        policy: Int,
        options: EvaluationOptions,
        onReplyQueue: Bool,
        completion: @escaping @Sendable (Bool, (any Error)?, Data?) -> Void
    ) {
        let id = self.id
        evaluate(
            options: options,
            onReplyQueue: onReplyQueue,
            request: { .evaluate(.init(context: id, policy: policy, options: $0)) },
            completion: completion
        )
    }

    /// Runs a request answered by `evaluated` (an evaluation, or an access control's steps).
    /// `onReplyQueue`: `completion` runs on the context's private queue (Apple's callback API);
    /// otherwise on the thread that read the answer (an `async` caller's continuation, which only
    /// enqueues its task).
    func evaluate(
        options: EvaluationOptions,
        onReplyQueue: Bool,
        request: @escaping @Sendable (EvaluationOptions) -> Request,
        completion: @escaping @Sendable (Bool, (any Error)?, Data?) -> Void
    ) {
        let deliver: @Sendable (Bool, (any Error)?, Data?) -> Void
        if onReplyQueue {
            deliver = { [replyQueue] s, e, d in replyQueue.async { completion(s, e, d) } }
        } else {
            deliver = completion
        }
        guard !options.reason.isEmpty else {
            return deliver(
                false,
                LAError(.authenticationFailed, message: "localizedReason must be a non-empty string"),
                nil
            )
        }
        do {
            try runPrompted(
                presentable: !options.interactionNotAllowed,
                request: { presents in
                    var options = options
                    options.onTerminal = presents
                    return request(options)
                },
                finish: { result in
                    switch result {
                    case .success(.evaluated(let r)):
                        if r.success { return deliver(true, nil, r.domainState) }
                        deliver(
                            false,
                            LAError(
                                LAError.Code(rawValue: r.error?.rawValue ?? -4) ?? .systemCancel,
                                message: r.message
                            ),
                            nil
                        )
                    case .success(.failure(let f)): deliver(false, LAError(.systemCancel, message: f.message), nil)
                    case .success(let other):
                        deliver(false, LAError(.systemCancel, message: "unexpected reply \(other)"), nil)
                    case .failure(let e): deliver(false, LAError(.systemCancel, message: "\(e)"), nil)
                    }
                }
            )
        } catch {
            switch error {
            case .invalidated: deliver(false, LAError(.invalidContext), nil)
            case .busy:
                deliver(
                    false,
                    LAError(.systemCancel, message: "An evaluation is already running on this context."),
                    nil
                )
            case .unreachable(let why): deliver(false, LAError(.systemCancel, message: why), nil)
            }
        }
    }
}
