/// What went wrong in the login server apart from the answers it gives (`APIError`, the wire's):
/// its one error type (GRDB's `DatabaseError` shape). `code` is what a caller decides on: the HTTP
/// layer answers `tooManyAttempts…` with 429 and Retry-After and the rest met while serving with
/// 500 (`LoginHTTPServer`); the service turns an expected `duplicate` into the API's own code; a
/// bad `storeConfiguration` or `attestationRoots` stops the server at start, said whole.
public struct LoginServerError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        /// Too many attempts from one address: wait `retryAfter` seconds.
        case tooManyAttemptsFromAddress
        /// Too many attempts for one account: wait `retryAfter` seconds.
        case tooManyAttemptsForAccount
        /// The store holds that name or credential already.
        case duplicate
        /// A statement that always returns a row returned none.
        case noAnswer
        /// The store's URL or TLS settings are not usable.
        case storeConfiguration
        /// The attestation roots file is not usable.
        case attestationRoots
    }

    public let code: Code
    public let message: String
    /// Seconds to wait, with `tooManyAttempts…`.
    public let retryAfter: Int?

    public init(_ code: Code, _ message: String, retryAfter: Int? = nil) {
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    /// Too many attempts: HTTP 429 with Retry-After.
    static func tooManyAttempts(forAccount: Bool, retryAfter: Int) -> LoginServerError {
        LoginServerError(
            forAccount ? .tooManyAttemptsForAccount : .tooManyAttemptsFromAddress,
            "Too many attempts \(forAccount ? "for this account" : "from this address"); try again in \(retryAfter) s.",
            retryAfter: retryAfter
        )
    }

    static let duplicate = LoginServerError(.duplicate, "the store holds it already")

    public var description: String { message }
}
