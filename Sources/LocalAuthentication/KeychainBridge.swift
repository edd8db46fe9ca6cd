import EnclaveClient
import EnclaveProtocol
import Foundation

/// What the Security module needs from LocalAuthentication: run one keychain request on a
/// context (the caller's, or a one-shot one), presenting any prompt the daemon opens.
@_spi(EnclaveKeychain)
extension LAContext {
    /// Runs `request` synchronously, as SecItem calls are. `context` nil makes a one-shot context
    /// that is released afterwards. Failures to reach the daemon answer `errSecNotAvailable`.
    public static func _performKeychain(_ operation: KeychainOperation, _ base: KeychainRequest, context: LAContext?) -> KeychainReply {
        var request = base
        let presentable = !base.interactionNotAllowed && !(base.authenticationUI?.forbidsPrompt ?? false)
        let result = perform(context: context, presentable: presentable) { owner, presents in
            request.context = owner.core.id
            if request.reason == nil || request.reason!.isEmpty {
                let r = owner.localizedReason
                request.reason = r.isEmpty ? nil : r
            }
            request.interactionNotAllowed = request.interactionNotAllowed || owner.interactionNotAllowed
            if request.applicationPassword == nil { request.applicationPassword = owner.credential(.applicationPassword) }
            request.clientPresents = presents
            return .keychain(operation, request)
        }
        switch result {
        case .success(.keychain(let k)): return k
        case .success(.failure(let f)): return KeychainReply(status: KeychainStatus.param, message: f.message)
        case .success(let other): return KeychainReply(status: KeychainStatus.notAvailable, message: "unexpected reply \(other)")
        case .failure(.invalidated): return KeychainReply(status: KeychainStatus.authFailed, message: "the LAContext was invalidated")
        case .failure(.busy): return KeychainReply(status: KeychainStatus.interactionNotAllowed, message: "another operation is running on this LAContext")
        case .failure(.unreachable(let why)): return KeychainReply(status: KeychainStatus.notAvailable, message: why)
        }
    }

    /// Runs a Secure Enclave key operation synchronously on `context` (or a one-shot context).
    public static func _performKeyOperation(_ base: KeyRequest, context: LAContext?) -> KeyReply {
        var request = base
        let result = perform(context: context, presentable: !base.interactionNotAllowed) { owner, presents in
            request.context = owner.core.id
            if request.reason == nil || request.reason!.isEmpty {
                let r = owner.localizedReason
                request.reason = r.isEmpty ? nil : r
            }
            request.interactionNotAllowed = request.interactionNotAllowed || owner.interactionNotAllowed
            request.clientPresents = presents
            return .key(request)
        }
        switch result {
        case .success(.key(let k)): return k
        case .success(.failure(let f)): return KeyReply(problem: .invalidParameter, message: f.message)
        case .success(let other): return KeyReply(problem: .notAvailable, message: "unexpected reply \(other)")
        case .failure(.invalidated): return KeyReply(problem: .authentication, message: "the LAContext was invalidated", authenticationError: .invalidContext)
        case .failure(.busy): return KeyReply(problem: .notAvailable, message: "another operation is running on this LAContext")
        case .failure(.unreachable(let why)): return KeyReply(problem: .notAvailable, message: why)
        }
    }

    /// One blocking request on the caller's context (or a one-shot one, released afterwards),
    /// presenting any prompt the daemon opens.
    private static func perform(context: LAContext?, presentable: Bool,
                                _ make: @escaping (LAContext, Bool) -> Request) -> Result<Reply, ContextCore.StartProblem> {
        let owner = context ?? LAContext()
        defer { if context == nil { owner.invalidate() } }
        let done = DispatchSemaphore(value: 0)
        let box = ReplyBox()
        do {
            try owner.core.runPrompted(presentable: presentable, request: { presents in make(owner, presents) }, finish: { result in
                switch result {
                case .success(let reply): box.value = reply
                case .failure(.protocolError(let why)): box.value = .failure(Failure(.invalidParameter, why))
                case .failure(let e): box.unreachable = "\(e)"
                }
                done.signal()
            })
        } catch {
            return .failure(error)
        }
        done.wait()
        if let why = box.unreachable { return .failure(.unreachable(why)) }
        return .success(box.value ?? .failure(Failure(.internalError, "no reply")))
    }
}

private final class ReplyBox: @unchecked Sendable {
    var value: Reply?
    var unreachable: String?
}
