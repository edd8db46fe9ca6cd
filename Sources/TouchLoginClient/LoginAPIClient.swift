import Foundation
import TouchLoginAPI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The server's HTTP API, as calls. Every failure is an `APIError`: the server's own (with its
/// stable code) or `unavailable` when the server cannot be reached.
public struct LoginAPIClient: Sendable {
    public let baseURL: URL

    public init(baseURL: URL) { self.baseURL = baseURL }

    public func createAccount(username: String, password: String) async throws -> SessionResponse {
        try await call("POST", "api/accounts", CreateAccountRequest(username: username, password: password))
    }

    /// `clientToken`: what the server gave this client at its last password login for this name.
    public func passwordLogin(
        username: String,
        password: String,
        clientToken: String? = nil
    ) async throws -> SessionResponse {
        try await call(
            "POST",
            "api/session",
            PasswordLoginRequest(username: username, password: password, clientToken: clientToken)
        )
    }

    /// A step-up: the password typed again into the session, before devices change.
    public func confirmPassword(token: String, password: String) async throws {
        let _: Empty = try await call(
            "POST",
            "api/session/password",
            PasswordConfirmationRequest(password: password),
            token: token
        )
    }

    public func changePassword(token: String, current: String, new: String) async throws {
        let _: Empty = try await call(
            "POST",
            "api/account/password",
            PasswordChangeRequest(currentPassword: current, newPassword: new),
            token: token
        )
    }

    public func logout(token: String) async throws {
        let _: Empty = try await call("DELETE", "api/session", Optional<Empty>.none, token: token)
    }

    public func account(token: String) async throws -> AccountResponse {
        try await call("GET", "api/account", Optional<Empty>.none, token: token)
    }

    public func registrationOptions(token: String, deviceName: String) async throws -> RegistrationOptionsResponse {
        try await call(
            "POST",
            "api/devices/options",
            RegistrationOptionsRequest(deviceName: deviceName, kind: .deviceKey),
            token: token
        )
    }

    public func register(token: String, _ request: RegistrationRequest) async throws -> DeviceResponse {
        try await call("POST", "api/devices", request, token: token)
    }

    public func tpmAttestationKeyChallenge(
        token: String,
        _ request: TPMAttestationKeyChallengeRequest
    ) async throws -> TPMAttestationKeyChallengeResponse {
        try await call("POST", "api/tpm/attestation-key/challenge", request, token: token)
    }

    public func tpmAttestationKeyCertificate(
        token: String,
        _ request: TPMAttestationKeyCertificateRequest
    ) async throws -> TPMAttestationKeyCertificateResponse {
        try await call("POST", "api/tpm/attestation-key/certificate", request, token: token)
    }

    public func renameDevice(token: String, id: String, name: String) async throws -> DeviceResponse {
        try await call("PATCH", "api/devices/\(id)", RenameDeviceRequest(name: name), token: token)
    }

    public func revokeDevice(token: String, id: String) async throws {
        let _: Empty = try await call("DELETE", "api/devices/\(id)", Optional<Empty>.none, token: token)
    }

    public func assertionOptions(username: String?) async throws -> AssertionOptionsResponse {
        try await call("POST", "api/passkey/options", AssertionOptionsRequest(username: username))
    }

    public func passkeyLogin(_ request: AssertionRequest) async throws -> SessionResponse {
        try await call("POST", "api/passkey/login", request)
    }

    struct Empty: Codable {}

    func call<Body: Encodable, Answer: Decodable>(
        _ method: String,
        _ path: String,
        _ body: Body?,
        token: String? = nil
    ) async throws -> Answer {
        var request = URLRequest(url: baseURL.appendingPathComponent(path))
        request.httpMethod = method
        request.timeoutInterval = 30
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONEncoder().encode(body)
        }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let data: Data
        let response: URLResponse
        do { (data, response) = try await URLSession.shared.data(for: request) } catch {
            throw APIError(
                .unavailable,
                "The server at \(baseURL.absoluteString) cannot be reached (\(error.localizedDescription))."
            )
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            if let e = try? JSONDecoder().decode(APIError.self, from: data) { throw e }
            throw APIError(.unavailable, "The server answered HTTP \(status) without an error body.")
        }
        if Answer.self == Empty.self, data.isEmpty { return Empty() as! Answer }
        do { return try JSONDecoder().decode(Answer.self, from: data) } catch {
            throw APIError(.internalError, "The server's answer to \(method) /\(path) is not the expected JSON.")
        }
    }
}
