import EnclaveProtocol

extension DaemonError {
    /// What the client is told, or nil when it hears only that the daemon could not complete the
    /// request (the detail — a path, a store's or a socket's failure — stays in the daemon's log).
    var failure: Failure? {
        switch code {
        case .busy: Failure(.busy, message)
        case .notPermitted: Failure(.notPermitted, message)
        case .invalidParameter: Failure(.invalidParameter, message)
        case .notFound: Failure(.notFound, message)
        case .alreadyExists: Failure(.alreadyExists, message)
        case .passcodeIncorrect: Failure(.passcodeIncorrect, message)
        case .passcodeRetryLater: Failure(.passcodeRetryLater, message, retryAfter: retryAfter)
        case .passcodeNotSet: Failure(.passcodeNotSet, message)
        case .passcodeAlreadySet: Failure(.passcodeAlreadySet, message)
        case .passcodeDisabled: Failure(.passcodeDisabled, message)
        case .noSensor: Failure(.noSensor, message)
        case .stateNotSaved, .rollbackCounterNotMoved: Failure(.internalError, message)
        case .alreadyRunning, .cannotLock, .masterKeyFile, .privateFile, .socketDirectory, .socketPathOccupied,
            .socketActivation, .masterKeyRoot, .rootRecovery, .rootMove, .attestationKey, .peerHelper,
            .sensorUnavailable, .sensorFailed, .tpmCommandFailed, .dbusCallFailed, .duplicateItem,
            .itemChangedMeanwhile, .keychainQuotaExceeded,
            .keyQuotaExceeded, .passcodeRemoved, .classKeyDamaged, .attributesNotRead, .keyInvalid, .keyInvalidated,
            .keyNotAvailable:
            nil
        }
    }

    /// What a Secure Enclave key request's answer says, or nil when it says only that the key
    /// operation could not complete (the rest is logged).
    var keyProblem: KeyReply.Problem? {
        switch code {
        case .keyInvalid: .invalidKey
        case .keyInvalidated: .invalidated
        case .keyNotAvailable, .keyQuotaExceeded: .notAvailable
        case .invalidParameter: .invalidParameter
        case .busy, .notPermitted, .notFound, .alreadyExists, .passcodeIncorrect, .passcodeRetryLater, .passcodeNotSet,
            .passcodeAlreadySet, .passcodeDisabled, .noSensor, .stateNotSaved, .rollbackCounterNotMoved, .duplicateItem,
            .itemChangedMeanwhile, .keychainQuotaExceeded, .passcodeRemoved, .classKeyDamaged, .attributesNotRead,
            .alreadyRunning, .cannotLock, .masterKeyFile, .privateFile, .socketDirectory, .socketPathOccupied,
            .socketActivation, .masterKeyRoot, .rootRecovery, .rootMove, .attestationKey, .peerHelper,
            .sensorUnavailable, .sensorFailed, .tpmCommandFailed, .dbusCallFailed:
            nil
        }
    }

    /// The wire's answer to `error` when it is one the client is told (the daemon's own, or a
    /// refusal the wire's rules made: `Request.validate`, `AdminPolicy`).
    static func failure(for error: any Error) -> Failure? {
        if let failure = error as? Failure { return failure }
        return (error as? DaemonError)?.failure
    }
}
