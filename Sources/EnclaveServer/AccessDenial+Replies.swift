import EnclaveCore
import EnclaveProtocol

/// `AccessDenial`, mapped once per surface at the edge.
extension AccessPlan.Invalidation {
    /// In words, naming what is no longer usable.
    func message(_ what: String) -> String {
        switch self {
        case .enrolmentChanged:
            return
                "the \(what) was protected with biometryCurrentSet and the enrolled identities have changed since; it can never be used again, only deleted"
        case .passcodeRemoved:
            return "the \(what) needed a device passcode, which was removed; it can never be used again"
        case .unreadable: return "the \(what)'s access control is damaged; it can only be deleted"
        }
    }
}

extension KeychainFailure {
    init(_ denial: AccessDenial) {
        switch denial {
        case .invalidated(let why): self.init(.invalidItemRef, why.message("item"))
        case .failed(let code, let message): self.init(KeychainStatus(authenticationFailure: code), message)
        case .unavailable(let why): self.init(.notAvailable, "the keychain could not read the user's state: \(why)")
        }
    }
}

extension KeychainStatus {
    /// The status a keychain call answers when a step of the item's access control failed.
    init(authenticationFailure code: LAErrorCode) {
        switch code {
        case .userCancel, .appCancel, .systemCancel, .userFallback: self = .userCanceled
        case .notInteractive: self = .interactionNotAllowed
        default: self = .authFailed
        }
    }
}

extension KeyReply {
    init(_ denial: AccessDenial) {
        switch denial {
        case .invalidated(let why): self.init(problem: .invalidated, message: why.message("key"))
        case .failed(let code, let message):
            self.init(problem: .authentication, message: message, authenticationError: code)
        case .unavailable(let why):
            self.init(problem: .notAvailable, message: "the key operation could not read the user's state: \(why)")
        }
    }
}

extension EvaluationResult {
    init(_ denial: AccessDenial, biometryType: BiometryKind) {
        switch denial {
        case .failed(let code, let message):
            self.init(success: false, error: code, message: message, biometryType: biometryType, domainState: nil)
        case .invalidated(let why):
            self.init(
                success: false,
                error: .authenticationFailed,
                message: why.message("access control"),
                biometryType: biometryType,
                domainState: nil
            )
        case .unavailable(let why):
            self.init(success: false, error: .systemCancel, message: why, biometryType: biometryType, domainState: nil)
        }
    }
}
