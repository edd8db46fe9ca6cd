import Foundation
import TouchLoginAPI
import TouchLoginServer
import WebAuthn
import XCTest

/// A login service in the test's process: SQLite in a temporary directory, a manual clock, the
/// cheapest password cost. Calls go to `LoginService` directly, as the HTTP shell makes them.
public final class LoginServiceHarness: Sendable {
    public let directory: String
    public let clock: ManualClock
    public let service: LoginService
    /// The service's store, for what a test sets up or checks underneath it.
    public let store: SQLiteLoginStore
    public static let origin = "http://localhost:8080"

    public init(configure: (inout ServerConfiguration) -> Void = { _ in }) async throws {
        var template = Array("/tmp/la-login-unit-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        let store = try SQLiteLoginStore(path: directory + "/server.sqlite")
        try await store.migrate()
        self.store = store
        var configuration = ServerConfiguration()
        configuration.passwordCost = 10
        configure(&configuration)
        let clock = ManualClock()
        self.clock = clock
        service = LoginService(store: store, configuration: configuration, clock: clock.read)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// A new account with `password`; returns its first session.
    @discardableResult
    public func signUp(
        _ username: String,
        password: String = "correct horse",
        from address: String = "192.0.2.1"
    ) async throws -> SessionResponse {
        try await service.createAccount(CreateAccountRequest(username: username, password: password), address: address)
    }

    /// A software passkey bound through the session `token` (a password session, fresh).
    public func bindPasskey(
        token: String,
        name: String = "soft",
        from address: String = "192.0.2.1",
        authenticator: SoftwareAuthenticator = SoftwareAuthenticator(origin: LoginServiceHarness.origin),
        transports: [String]? = nil,
        kind: CredentialKind? = nil
    ) async throws -> SoftwareAuthenticator {
        let (session, account) = try await service.authenticate(bearer: token)
        let options = try await service.registrationOptions(
            session: session,
            account: account,
            RegistrationOptionsRequest(deviceName: name, kind: kind)
        )
        _ = try await service.register(
            session: session,
            account: account,
            RegistrationRequest(
                deviceName: name,
                kind: kind,
                credential: try authenticator.registration(
                    challenge: options.publicKey.challenge,
                    transports: transports
                ),
                keyCertificates: authenticator.keyCertificates
            ),
            address: address
        )
        return authenticator
    }

    /// A passkey login with `authenticator` for `username`: options, then the signed answer.
    public func passkeyLogin(
        _ authenticator: inout SoftwareAuthenticator,
        username: String?,
        claiming id: Data? = nil,
        from address: String = "192.0.2.1"
    ) async throws -> SessionResponse {
        let options = try await service.assertionOptions(AssertionOptionsRequest(username: username), address: address)
        let credential = try authenticator.assertion(challenge: options.publicKey.challenge, as: id)
        return try await service.passkeyLogin(AssertionRequest(credential: credential), address: address)
    }

    public func passwordLogin(
        _ username: String,
        _ password: String,
        from address: String = "192.0.2.1"
    ) async throws -> SessionResponse {
        try await service.passwordLogin(PasswordLoginRequest(username: username, password: password), address: address)
    }

    /// The stable code of what `body` threw ("rate_limited" when it had to wait), or nil if it returned.
    public static func code(_ body: () async throws -> Any) async -> String? {
        do {
            _ = try await body()
            return nil
        } catch let e as APIError { return e.code } catch let e as LoginServerError where e.retryAfter != nil {
            return APIError.Code.rateLimited.rawValue
        } catch {
            return "\(error)"
        }
    }
}
