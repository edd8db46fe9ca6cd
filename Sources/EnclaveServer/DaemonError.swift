import EnclaveProtocol

/// What went wrong in the daemon: its one error type (GRDB's `DatabaseError` shape). `code` is what
/// a caller decides on, stable (logs and tests name it); `message` says it in words for the log and,
/// for a refusal, the person. The wire learns it in one place (`DaemonError+Wire.swift`).
public struct DaemonError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        // A request refused: answered with the wire's code of the same name.
        case busy
        case notPermitted
        case invalidParameter
        case notFound
        case alreadyExists
        case passcodeIncorrect
        case passcodeRetryLater
        case passcodeNotSet
        case passcodeAlreadySet
        case passcodeDisabled
        case noSensor

        // A change the daemon could not make durable: answered as an internal error, saying which.
        case stateNotSaved
        case rollbackCounterNotMoved

        // The stores' own, which the request's answer says in its terms (a keychain status, a
        // key's problem).
        case duplicateItem
        case itemChangedMeanwhile
        case keychainQuotaExceeded
        case keyQuotaExceeded
        case passcodeRemoved
        case classKeyDamaged
        case attributesNotRead

        // A Secure Enclave key request refused: answered as the key's problem.
        case keyInvalid
        case keyInvalidated
        case keyNotAvailable

        // The daemon cannot start or serve: said in full at start; a request that ends on one
        // hears only that the daemon could not complete it (the rest is logged), except an
        // evaluation, whose LAError says what the sensor or the TPM said.
        case alreadyRunning
        case cannotLock
        case masterKeyFile
        case privateFile
        case socketDirectory
        case socketPathOccupied
        case socketActivation
        case masterKeyRoot
        case rootRecovery
        case rootMove
        case attestationKey
        case peerHelper
        case sensorUnavailable
        case sensorFailed
        case tpmCommandFailed
        case dbusCallFailed
    }

    public let code: Code
    public let message: String
    /// Seconds until a refused attempt may be made again (`passcodeRetryLater`).
    public let retryAfter: Double?
    /// The TPM's response code (`tpmCommandFailed`), which says what it refused.
    public let tpmResponse: UInt32?
    /// The D-Bus error's name (`dbusCallFailed`), e.g. fprintd's `net.reactivated.Fprint.Error.…`.
    public let dbusName: String?

    public init(
        _ code: Code,
        _ message: String,
        retryAfter: Double? = nil,
        tpmResponse: UInt32? = nil,
        dbusName: String? = nil
    ) {
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
        self.tpmResponse = tpmResponse
        self.dbusName = dbusName
    }

    public var description: String { dbusName.map { "\($0): \(message)" } ?? message }
}
