import CryptoKit
import LocalAuthentication
import TouchLoginAPI

/// What went wrong on the login client: its one error type (GRDB's `DatabaseError` shape). `code`
/// is what a caller decides on; `message` says it to the person; a fingerprint step that ended
/// without a login also carries the reason the flow needs (`problem`).
public struct ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        /// The state file cannot be read, written or replaced.
        case stateFile
        /// The server asks for what this client cannot give (a key type, a format it did not encode).
        case serverUnsupported
        /// The key's access control could not be described.
        case accessControl
        /// This TPM could not open the credential the server wrapped for its endorsement key and
        /// the daemon's attestation key: the server's challenge was made for another TPM or key (a
        /// server that was sent someone else's endorsement, or something in between). Never a
        /// reason to register with another format as if nothing happened.
        case tpmCredentialRefused
        /// The server asks only for `tpm` statements, and this machine's daemon cannot make one.
        case tpmAttestationUnavailable
        /// The fingerprint step ended without a login (`problem` says why).
        case fingerprint
    }

    public let code: Code
    public let message: String
    /// With `fingerprint`: the reason, as the flow says it.
    public let problem: FingerprintProblem?

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
        problem = nil
    }

    public init(_ problem: FingerprintProblem) {
        code = .fingerprint
        message = problem.explanation
        self.problem = problem
    }

    public var description: String { message }

    /// LocalAuthentication's, the enclave key's and the server's errors, as the flow's reasons.
    public static func fingerprintProblem(of error: any Error) -> FingerprintProblem {
        if let e = error as? ClientError, let problem = e.problem { return problem }
        if let e = error as? LAError {
            switch e.code {
            case .userCancel, .appCancel, .systemCancel, .userFallback: return .cancelled
            case .authenticationFailed: return .notRecognised
            case .biometryLockout: return .lockedOut
            case .invalidContext: return .cancelled
            default: return .unavailable(e.localizedDescription)
            }
        }
        if let e = error as? SecureEnclaveKeyError {
            if case .keyInvalidated = e { return .keyInvalidated }
            return .unavailable("\(e)")
        }
        if let e = error as? APIError {
            if e.code == APIError.Code.unknownCredential.rawValue { return .deviceRevoked }
            return .server(e.description)
        }
        return .unavailable("\(error)")
    }
}
