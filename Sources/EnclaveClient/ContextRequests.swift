import EnclaveProtocol
import Foundation

/// What a keychain or key call needs from the app's context (`LAContext`): its daemon-side
/// identity and the options it carries. Security and CryptoKit see contexts through this, so that
/// Security sits below LocalAuthentication as on Apple platforms (`import LocalAuthentication`
/// brings Security with it). `package` access: an app never reaches it.
package protocol RequestContext: AnyObject, Sendable {
    var core: ContextCore { get }
    var localizedReason: String { get }
    var interactionNotAllowed: Bool { get }
    /// The credential set with `setCredential(_:type: .applicationPassword)`, if any.
    var applicationPassword: Data? { get }
}

/// The fields a keychain or key request takes from the context it runs on.
protocol ContextBoundRequest {
    var context: String { get set }
    var reason: String? { get set }
    var interactionNotAllowed: Bool { get set }
    var onTerminal: Bool { get set }
}

extension KeychainRequest: ContextBoundRequest {}
extension KeyRequest: ContextBoundRequest {}

/// The context of a call given none: default options, released after its one request.
private final class OneShotContext: RequestContext {
    let core = ContextCore(endpoint: EnclaveEndpoint.resolve())
    var localizedReason: String { "" }
    var interactionNotAllowed: Bool { false }
    var applicationPassword: Data? { nil }
}

/// Runs one keychain or key request on a context (the caller's, or a one-shot one), presenting
/// any prompt the daemon opens.
package enum ContextRequests {
    /// Runs `request` synchronously, as SecItem calls are. `context` nil makes a one-shot context
    /// that is released afterwards. Failures to reach the daemon answer `errSecNotAvailable`.
    package static func performKeychain(
        _ operation: KeychainOperation,
        _ base: KeychainRequest,
        context: (any RequestContext)?
    ) -> KeychainReply {
        let (presentable, make) = keychainRequest(operation, base)
        return keychainReply(perform(context: context, presentable: presentable, make))
    }

    /// The same, for async callers: waits for the answer (and any prompt) without holding a thread.
    package static func performKeychain(
        _ operation: KeychainOperation,
        _ base: KeychainRequest,
        context: (any RequestContext)?
    ) async -> KeychainReply {
        let (presentable, make) = keychainRequest(operation, base)
        return keychainReply(await perform(context: context, presentable: presentable, make))
    }

    /// Runs a Secure Enclave key operation synchronously on `context` (or a one-shot context).
    package static func performKeyOperation(_ base: KeyRequest, context: (any RequestContext)?) -> KeyReply {
        keyReply(perform(context: context, presentable: !base.interactionNotAllowed, keyRequest(base)))
    }

    /// The same, for async callers: waits for the answer (and any prompt) without holding a thread.
    package static func performKeyOperation(_ base: KeyRequest, context: (any RequestContext)?) async -> KeyReply {
        keyReply(await perform(context: context, presentable: !base.interactionNotAllowed, keyRequest(base)))
    }

    private typealias MakeRequest = @Sendable (any RequestContext, Bool) -> Request

    private static func keychainRequest(
        _ operation: KeychainOperation,
        _ base: KeychainRequest
    ) -> (presentable: Bool, MakeRequest) {
        let presentable = !base.interactionNotAllowed && !(base.authenticationUI?.forbidsPrompt ?? false)
        return (
            presentable,
            { owner, presents in
                var request = bind(base, to: owner, presents: presents)
                if request.applicationPassword == nil { request.applicationPassword = owner.applicationPassword }
                return .keychain(operation, request)
            }
        )
    }

    private static func keychainReply(_ result: Result<Reply, ContextCore.StartProblem>) -> KeychainReply {
        switch result {
        case .success(.keychain(let k)): return k
        case .success(.failure(let f)): return KeychainReply(status: KeychainStatus.param, message: f.message)
        case .success(let other):
            return KeychainReply(status: KeychainStatus.notAvailable, message: "unexpected reply \(other)")
        case .failure(.invalidated):
            return KeychainReply(status: KeychainStatus.authFailed, message: "the LAContext was invalidated")
        case .failure(.busy):
            return KeychainReply(
                status: KeychainStatus.interactionNotAllowed,
                message: "another operation is running on this LAContext"
            )
        case .failure(.unreachable(let why)): return KeychainReply(status: KeychainStatus.notAvailable, message: why)
        }
    }

    private static func keyRequest(_ base: KeyRequest) -> MakeRequest {
        { owner, presents in .key(bind(base, to: owner, presents: presents)) }
    }

    /// A request as it runs on `owner`: its context, the context's reason when the call gave
    /// none, and no prompt when either forbids one.
    private static func bind<R: ContextBoundRequest>(_ base: R, to owner: any RequestContext, presents: Bool) -> R {
        var request = base
        request.context = owner.core.id
        if request.reason?.isEmpty ?? true {
            let r = owner.localizedReason
            request.reason = r.isEmpty ? nil : r
        }
        request.interactionNotAllowed = request.interactionNotAllowed || owner.interactionNotAllowed
        request.onTerminal = presents
        return request
    }

    private static func keyReply(_ result: Result<Reply, ContextCore.StartProblem>) -> KeyReply {
        switch result {
        case .success(.key(let k)): return k
        case .success(.failure(let f)): return KeyReply(problem: .invalidParameter, message: f.message)
        case .success(let other): return KeyReply(problem: .notAvailable, message: "unexpected reply \(other)")
        case .failure(.invalidated):
            return KeyReply(
                problem: .authentication,
                message: "the LAContext was invalidated",
                authenticationError: .invalidContext
            )
        case .failure(.busy):
            return KeyReply(problem: .notAvailable, message: "another operation is running on this LAContext")
        case .failure(.unreachable(let why)): return KeyReply(problem: .notAvailable, message: why)
        }
    }

    /// One blocking request on the caller's context (or a one-shot one, released afterwards),
    /// presenting any prompt the daemon opens: for the synchronous API (SecItem…), as on Apple's.
    /// The calling thread reads its own reply.
    private static func perform(
        context: (any RequestContext)?,
        presentable: Bool,
        _ make: @escaping MakeRequest
    ) -> Result<Reply, ContextCore.StartProblem> {
        let owner: any RequestContext = context ?? OneShotContext()
        defer { if context == nil { owner.core.invalidate() } }
        let result: Result<Reply, EnclaveClientError>
        do {
            result = try owner.core.runPromptedBlocking(presentable: presentable) { presents in make(owner, presents) }
        } catch {
            return .failure(error)
        }
        return answer(result)
    }

    /// The reply as the API layer sees it: a request the wire refused is an invalid parameter;
    /// a connection that failed leaves the daemon unreachable.
    private static func answer(_ result: Result<Reply, EnclaveClientError>) -> Result<Reply, ContextCore.StartProblem> {
        switch result {
        case .success(let reply): return .success(reply)
        case .failure(.protocolError(let why)): return .success(.failure(Failure(.invalidParameter, why)))
        case .failure(let e): return .failure(.unreachable("\(e)"))
        }
    }

    private static func perform(
        context: (any RequestContext)?,
        presentable: Bool,
        _ make: @escaping MakeRequest
    ) async -> Result<Reply, ContextCore.StartProblem> {
        await withCheckedContinuation { continuation in
            start(context: context, presentable: presentable, make) { continuation.resume(returning: $0) }
        }
    }

    /// Starts one request; `finish` gets its answer exactly once.
    private static func start(
        context: (any RequestContext)?,
        presentable: Bool,
        _ make: @escaping MakeRequest,
        finish: @escaping @Sendable (Result<Reply, ContextCore.StartProblem>) -> Void
    ) {
        let owner: any RequestContext = context ?? OneShotContext()
        let oneShot = context == nil
        do {
            try owner.core.runPrompted(
                presentable: presentable,
                request: { presents in make(owner, presents) },
                finish: { result in
                    if oneShot { owner.core.invalidate() }
                    finish(answer(result))
                }
            )
        } catch {
            if oneShot { owner.core.invalidate() }
            finish(.failure(error))
        }
    }
}
