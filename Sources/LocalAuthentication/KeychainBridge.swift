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
        let owner = context ?? LAContext()
        defer { if context == nil { owner.invalidate() } }
        var request = base
        request.context = owner.core.id
        if request.reason == nil || request.reason!.isEmpty {
            let r = owner.localizedReason
            request.reason = r.isEmpty ? nil : r
        }
        request.interactionNotAllowed = request.interactionNotAllowed || owner.interactionNotAllowed
        if request.applicationPassword == nil { request.applicationPassword = owner.credential(.applicationPassword) }
        let done = DispatchSemaphore(value: 0)
        let box = KeychainReplyBox()
        let presentable = !request.interactionNotAllowed && request.authenticationUI != "u_AuthUIF" && request.authenticationUI != "u_AuthUIS"
        do {
            try owner.core.runPrompted(presentable: presentable, request: { presents in
                var r = request
                r.clientPresents = presents
                return .keychain(operation, r)
            }, finish: { result in
                switch result {
                case .success(.keychain(let k)): box.value = k
                case .success(.failure(let f)): box.value = KeychainReply(status: KeychainStatus.param, message: f.message)
                case .success(let other): box.value = KeychainReply(status: KeychainStatus.notAvailable, message: "unexpected reply \(other)")
                case .failure(let e): box.value = KeychainReply(status: KeychainStatus.notAvailable, message: "\(e)")
                }
                done.signal()
            })
        } catch {
            switch error {
            case .invalidated: return KeychainReply(status: KeychainStatus.authFailed, message: "the LAContext was invalidated")
            case .busy: return KeychainReply(status: KeychainStatus.interactionNotAllowed, message: "another operation is running on this LAContext")
            case .unreachable(let why): return KeychainReply(status: KeychainStatus.notAvailable, message: why)
            }
        }
        done.wait()
        return box.value ?? KeychainReply(status: KeychainStatus.notAvailable)
    }

}

private final class KeychainReplyBox: @unchecked Sendable { var value: KeychainReply? }
