import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TouchLoginAPI
import TouchLoginServer
import TouchLoginTestSupport
import XCTest

/// The HTTP shell in-process (HummingbirdTesting, a live server on a loopback port): client
/// addresses behind proxies, and what the new rules look like on the wire.
final class LoginHTTPServerTests: XCTestCase {
    func application(
        _ configure: @escaping (inout ServerConfiguration) -> Void
    ) async throws -> (some ApplicationProtocol, LoginServiceHarness) {
        let harness = try await LoginServiceHarness(configure: configure)
        let app = Application(
            router: LoginHTTPServer.router(harness.service),
            configuration: .init(address: .hostname("127.0.0.1", port: 0))
        )
        return (app, harness)
    }

    static func passwordLogin(
        _ client: some TestClientProtocol,
        from forwardedClient: String
    ) async throws -> (HTTPResponse.Status, String?) {
        let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
        // A new name each time: only the address's limit is at stake, not a username's failures.
        let body = ByteBuffer(
            string: #"{"username": "nobody-\#(UInt32.random(in: 0...UInt32.max))", "password": "guess"}"#
        )
        return try await client.execute(
            uri: "/api/session",
            method: .post,
            headers: [.contentType: "application/json", xForwardedFor: forwardedClient],
            body: body
        ) {
            ($0.status, $0.headers[.retryAfter])
        }
    }

    func testClientsBehindATrustedProxyEachHaveTheirOwnBucket() async throws {
        let (app, harness) = try await application {
            $0.rateLimits.perAddress = .perMinute(5)
            $0.clientAddress = ClientAddress(trustedProxies: [IPNetwork("127.0.0.1")!])
        }
        defer { withExtendedLifetime(harness) {} }
        try await app.test(.live) { client in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<6 { statuses.append(try await Self.passwordLogin(client, from: "198.51.100.1").0) }
            XCTAssertEqual(statuses.last, .tooManyRequests, "\(statuses)")
            let other = try await Self.passwordLogin(client, from: "198.51.100.2")
            XCTAssertEqual(other.0, .unauthorized, "another client behind the same proxy is not limited by the first")
            let sameSlash64 = try await Self.passwordLogin(client, from: "2001:db8:1:2::1")
            XCTAssertEqual(sameSlash64.0, .unauthorized)
            for i in 0..<5 { _ = try await Self.passwordLogin(client, from: "2001:db8:1:2::\(i + 2)") }
            let (status, retryAfter) = try await Self.passwordLogin(client, from: "2001:db8:1:2:ffff::9")
            XCTAssertEqual(status, .tooManyRequests, "an IPv6 /64 is one client")
            XCTAssertNotNil(retryAfter)
        }
    }

    /// On the wire too: options for a name, answered with a key of the attacker's own under the
    /// listed ID, look the same (status and body) whether the name is an account or not.
    func testAForgedAnswerToANamesOptionsLooksTheSameOnTheWire() async throws {
        let (app, h) = try await application { _ in }
        _ = try await h.bindPasskey(token: try await h.signUp("carol").token)
        try await app.test(.live) { client in
            var seen: [String] = []
            for name in ["carol", "nobody"] {
                let options = try await client.execute(
                    uri: "/api/passkey/options",
                    method: .post,
                    headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"username": "\#(name)"}"#)
                ) { Data(buffer: $0.body) }
                let decoded = try JSONDecoder().decode(AssertionOptionsResponse.self, from: options)
                let id = try XCTUnwrap(
                    decoded.publicKey.allowCredentials?.first.flatMap { Data(base64URLEncoded: $0.id) }
                )
                var forger = SoftwareAuthenticator(origin: LoginServiceHarness.origin)
                let answer = try JSONEncoder().encode(
                    AssertionRequest(credential: try forger.assertion(challenge: decoded.publicKey.challenge, as: id))
                )
                seen.append(
                    try await client.execute(
                        uri: "/api/passkey/login",
                        method: .post,
                        headers: [.contentType: "application/json"],
                        body: ByteBuffer(data: answer)
                    ) { "\($0.status.code) \(String(buffer: $0.body))" }
                )
            }
            XCTAssertEqual(seen.first?.hasPrefix("400 "), true, "\(seen)")
            XCTAssertEqual(seen.first, seen.last, "an unknown name's decoy is refused as an account's device is")
        }
    }

    func testAnUntrustedPeerCannotChooseItsBucket() async throws {
        let (app, harness) = try await application { $0.rateLimits.perAddress = .perMinute(5) }
        defer { withExtendedLifetime(harness) {} }
        try await app.test(.live) { client in
            var statuses: [HTTPResponse.Status] = []
            for i in 0..<6 { statuses.append(try await Self.passwordLogin(client, from: "198.51.100.\(i)").0) }
            XCTAssertEqual(
                statuses.last,
                .tooManyRequests,
                "X-Forwarded-For from a peer nobody trusts is ignored: \(statuses)"
            )
        }
    }

    func testAStepUpOnAPasskeySessionAllowsBindingAgain() async throws {
        let (app, h) = try await application { _ in }
        var passkey = try await h.bindPasskey(token: try await h.signUp("carol").token)
        let token = try await h.passkeyLogin(&passkey, username: "carol").token
        try await app.test(.router) { client in
            let auth: HTTPFields = [.authorization: "Bearer \(token)", .contentType: "application/json"]
            let refused = try await client.execute(
                uri: "/api/devices/options",
                method: .post,
                headers: auth,
                body: ByteBuffer(string: "{}")
            ) { $0 }
            XCTAssertEqual(refused.status, .forbidden)
            XCTAssertEqual(
                try JSONDecoder().decode(APIError.self, from: Data(buffer: refused.body)).code,
                "step_up_required"
            )
            let wrong = try await client.execute(
                uri: "/api/session/password",
                method: .post,
                headers: auth,
                body: ByteBuffer(string: #"{"password": "guess"}"#)
            ) { $0.status }
            XCTAssertEqual(wrong, .unauthorized)
            let confirmed = try await client.execute(
                uri: "/api/session/password",
                method: .post,
                headers: auth,
                body: ByteBuffer(string: #"{"password": "correct horse"}"#)
            ) { $0.status }
            XCTAssertEqual(confirmed, .noContent)
            let allowed = try await client.execute(
                uri: "/api/devices/options",
                method: .post,
                headers: auth,
                body: ByteBuffer(string: "{}")
            ) { $0.status }
            XCTAssertEqual(allowed, .ok)
            h.clock.advance(by: 301)
            let stale = try await client.execute(
                uri: "/api/devices/options",
                method: .post,
                headers: auth,
                body: ByteBuffer(string: "{}")
            ) { $0.status }
            XCTAssertEqual(stale, .forbidden, "the step-up lasts five minutes")
        }
    }
}
