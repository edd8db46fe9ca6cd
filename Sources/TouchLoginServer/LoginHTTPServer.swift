import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization
import TouchLoginAPI

/// The request context: Hummingbird's, plus the peer address the kernel reports for the
/// connection (limits key on that, or on what a trusted proxy forwarded — never on a header an
/// untrusted client writes).
public struct LoginRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
    public var maxUploadSize: Int { LoginHTTPServer.maxBodyBytes }
}

/// The thin HTTP shell over `LoginService`: routes, JSON in and out, errors as stable codes.
public enum LoginHTTPServer {
    static let maxBodyBytes = 64 * 1024

    public static func router(_ service: LoginService) -> Router<LoginRequestContext> {
        let router = Router(context: LoginRequestContext.self)
        let clientAddress = service.configuration.clientAddress
        let warnedOfTheOtherHeader = OnceFlag()
        /// The client's address as the limits see it.
        @Sendable func address(_ request: Request, _ context: LoginRequestContext) -> String {
            let peer = context.remoteAddress?.ipAddress.flatMap { IPAddress($0) }
            let forwarded = request.headers[values: .forwarded]
            let xForwardedFor = request.headers[values: .xForwardedFor]
            if clientAddress.sentOnlyTheOtherHeader(peer: peer, forwarded: forwarded, xForwardedFor: xForwardedFor),
                warnedOfTheOtherHeader.first()
            {
                service.logger.warning(
                    "a trusted proxy sends only the forwarding header this server does not read: its clients share its address's limits (see --forwarded-header)",
                    metadata: ["reading": "\(clientAddress.header.rawValue)"]
                )
            }
            let resolved = clientAddress.resolve(peer: peer, forwarded: forwarded, xForwardedFor: xForwardedFor)
            return resolved?.description ?? context.remoteAddress?.pathname ?? "unknown"
        }
        router.add(middleware: ErrorMiddleware(logger: service.logger, metrics: service.metrics))

        router.get("/") { _, _ in html(LoginPage.html) }
        router.get("/openapi.yaml") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/yaml"],
                body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.yaml))
            )
        }
        router.get("/health") { _, _ in
            do {
                try await service.store.ping()
                return try json(HealthResponse(status: "ok", storage: service.store.kind))
            } catch {
                throw APIError(.unavailable, "The database does not answer.")
            }
        }
        router.get("/metrics") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: service.metrics.exposition()))
            )
        }

        let api = router.group("api")
        api.post("accounts") { request, context in
            try json(
                await service.createAccount(
                    try await decode(CreateAccountRequest.self, request),
                    address: address(request, context)
                ),
                status: .created
            )
        }
        api.post("session") { request, context in
            try json(
                await service.passwordLogin(
                    try await decode(PasswordLoginRequest.self, request),
                    address: address(request, context)
                )
            )
        }
        api.post("session/password") { request, context in
            let (session, account) = try await service.authenticate(bearer: bearer(request))
            try await service.confirmPassword(
                session: session,
                account: account,
                try await decode(PasswordConfirmationRequest.self, request),
                address: address(request, context)
            )
            return Response(status: .noContent)
        }
        api.delete("session") { request, _ in
            _ = try await service.authenticate(bearer: bearer(request))
            try await service.logout(token: bearer(request) ?? "")
            return Response(status: .noContent)
        }
        api.post("account/password") { request, context in
            let (session, account) = try await service.authenticate(bearer: bearer(request))
            try await service.changePassword(
                session: session,
                account: account,
                try await decode(PasswordChangeRequest.self, request),
                address: address(request, context)
            )
            return Response(status: .noContent)
        }
        api.get("account") { request, _ in
            let (_, account) = try await service.authenticate(bearer: bearer(request))
            return try json(await service.accountInfo(account))
        }
        api.post("devices/options") { request, _ in
            let (session, account) = try await service.authenticate(bearer: bearer(request))
            let body = try await decode(RegistrationOptionsRequest.self, request, emptyAs: RegistrationOptionsRequest())
            return try json(await service.registrationOptions(session: session, account: account, body))
        }
        api.post("devices") { request, context in
            let (session, account) = try await service.authenticate(bearer: bearer(request))
            return try json(
                await service.register(
                    session: session,
                    account: account,
                    try await decode(RegistrationRequest.self, request),
                    address: address(request, context)
                ),
                status: .created
            )
        }
        api.post("tpm/attestation-key/challenge") { request, _ in
            let (session, _) = try await service.authenticate(bearer: bearer(request))
            let body = try await decode(TPMAttestationKeyChallengeRequest.self, request)
            return try json(await service.tpmAttestationKeyChallenge(session: session, body))
        }
        api.post("tpm/attestation-key/certificate") { request, _ in
            let (session, _) = try await service.authenticate(bearer: bearer(request))
            let body = try await decode(TPMAttestationKeyCertificateRequest.self, request)
            return try json(await service.tpmAttestationKeyCertificate(session: session, body))
        }
        api.get("tpm/root") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/x-pem-file"],
                body: .init(byteBuffer: ByteBuffer(string: try await service.tpmAttestationRoot()))
            )
        }
        api.get("devices") { request, _ in
            let (_, account) = try await service.authenticate(bearer: bearer(request))
            return try json(await service.devices(of: account))
        }
        api.patch("devices/:id") { request, context in
            let (session, account) = try await service.authenticate(bearer: bearer(request))
            return try json(
                await service.rename(
                    session: session,
                    account: account,
                    credentialID: try context.parameters.require("id"),
                    try await decode(RenameDeviceRequest.self, request)
                )
            )
        }
        api.delete("devices/:id") { request, context in
            let (session, account) = try await service.authenticate(bearer: bearer(request))
            try await service.revoke(
                session: session,
                account: account,
                credentialID: try context.parameters.require("id"),
                address: address(request, context)
            )
            return Response(status: .noContent)
        }
        api.post("passkey/options") { request, context in
            let body = try await decode(AssertionOptionsRequest.self, request, emptyAs: AssertionOptionsRequest())
            return try json(await service.assertionOptions(body, address: address(request, context)))
        }
        api.post("passkey/login") { request, context in
            try json(
                await service.passkeyLogin(
                    try await decode(AssertionRequest.self, request),
                    address: address(request, context)
                )
            )
        }
        return router
    }

    static func bearer(_ request: Request) -> String? {
        guard let value = request.headers[.authorization], value.lowercased().hasPrefix("bearer ") else { return nil }
        return String(value.dropFirst(7)).trimmingCharacters(in: .whitespaces)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ request: Request, emptyAs empty: T? = nil) async throws -> T {
        var request = request
        let buffer: ByteBuffer
        do { buffer = try await request.collectBody(upTo: maxBodyBytes) } catch {
            throw APIError(.payloadTooLarge, "A request body may have at most \(maxBodyBytes / 1024) KiB.")
        }
        if buffer.readableBytes == 0, let empty { return empty }
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
        } catch let DecodingError.keyNotFound(key, _) {
            throw APIError(.malformedRequest, "The JSON body lacks \"\(key.stringValue)\".")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            throw APIError(
                .malformedRequest,
                "The JSON body has a wrong type at \(context.codingPath.map(\.stringValue).joined(separator: "."))."
            )
        } catch {
            throw APIError(.malformedRequest, "The body is not the expected JSON.")
        }
    }

    static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(value)))
        )
    }

    static func html(_ text: String) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: "text/html; charset=utf-8",
                .init("Content-Security-Policy")!:
                    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'",
            ],
            body: .init(byteBuffer: ByteBuffer(string: text))
        )
    }

    /// HTTP status for each stable error code.
    static func status(for code: String) -> HTTPResponse.Status {
        switch APIError.Code(rawValue: code) {
        case .malformedRequest?, .invalidUsername?, .weakPassword?: return .badRequest
        case .accountExists?, .credentialExists?: return .conflict
        case .invalidCredentials?, .unauthorized?, .unknownCredential?: return .unauthorized
        case .rateLimited?: return .tooManyRequests
        case .challengeUnknown?, .challengeExpired?: return .badRequest
        case .notFound?: return .notFound
        case .stepUpRequired?, .attestationRequired?, .attestationUntrusted?: return .forbidden
        case .passwordLocked?: return HTTPResponse.Status(code: 423, reasonPhrase: "Locked")
        case .payloadTooLarge?: return .contentTooLarge
        case .unavailable?: return .serviceUnavailable
        case .internalError?: return .internalServerError
        case nil: return .badRequest  // WebAuthn verification codes: the client sent something wrong
        }
    }
}

/// Turns every error into the JSON error shape; nothing else leaves the server.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = LoginRequestContext
    let logger: Logger
    let metrics: LoginMetrics

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        metrics.requests.increment()
        do {
            return try await next(request, context)
        } catch let e as APIError {
            return respond(e, status: LoginHTTPServer.status(for: e.code))
        } catch let e as LoginServerError where e.retryAfter != nil {
            var response = respond(APIError(.rateLimited, e.message), status: .tooManyRequests)
            response.headers[.retryAfter] = String(e.retryAfter ?? 0)
            return response
        } catch let e as HTTPError where e.status == .notFound {
            return respond(
                APIError(.notFound, "No such endpoint: \(request.method) \(request.uri.path)"),
                status: .notFound
            )
        } catch let e as HTTPError {
            return respond(APIError(.malformedRequest, "\(e.status.reasonPhrase)"), status: e.status)
        } catch {
            logger.error("request failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            return respond(
                APIError(.internalError, "The server could not complete the request."),
                status: .internalServerError
            )
        }
    }

    private func respond(_ error: APIError, status: HTTPResponse.Status) -> Response {
        (try? LoginHTTPServer.json(error, status: status)) ?? Response(status: status)
    }
}

extension HTTPField.Name {
    static let forwarded = Self("Forwarded")!
    static let xForwardedFor = Self("X-Forwarded-For")!
}

/// True the first time it is asked, false ever after.
final class OnceFlag: Sendable {
    private let asked = Atomic(false)
    func first() -> Bool { !asked.exchange(true, ordering: .relaxed) }
}
