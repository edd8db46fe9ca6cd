import Foundation

/// Every error the server answers, as `{"error": {"code": "...", "message": "..."}}`. Codes are
/// stable (clients switch on them); messages are for people. WebAuthn verification failures use
/// the WebAuthn module's codes (`challenge_mismatch`, `counter_regression`…).
public struct APIError: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    public struct Body: Codable, Sendable, Equatable {
        public var code: String
        public var message: String
    }
    public var error: Body

    public init(_ code: String, _ message: String) { error = Body(code: code, message: message) }
    public init(_ code: Code, _ message: String) { self.init(code.rawValue, message) }

    public var code: String { error.code }
    public var message: String { error.message }
    public var description: String { "\(error.message) (\(error.code))" }

    public enum Code: String, Sendable, CaseIterable {
        case malformedRequest = "malformed_request"
        case invalidUsername = "invalid_username"
        case weakPassword = "weak_password"
        case accountExists = "account_exists"
        case invalidCredentials = "invalid_credentials"
        case rateLimited = "rate_limited"
        case unauthorized = "unauthorized"
        case challengeUnknown = "challenge_unknown"
        case challengeExpired = "challenge_expired"
        case unknownCredential = "unknown_credential"
        case credentialExists = "credential_exists"
        case notFound = "not_found"
        case payloadTooLarge = "payload_too_large"
        case internalError = "internal_error"
        case unavailable = "unavailable"
        /// Binding or revoking a device needs the password typed again in this session.
        case stepUpRequired = "step_up_required"
        /// Too many consecutive wrong passwords: the password path waits for a passkey login or an operator.
        case passwordLocked = "password_locked"
        /// A credential was offered without an attestation, where the server requires one.
        case attestationRequired = "attestation_required"
        /// The attestation does not chain to a trusted root, or what it states is not accepted.
        case attestationUntrusted = "attestation_untrusted"
    }
}
