import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import TouchLoginTestSupport
import XCTest

/// Two server instances behind one PostgreSQL: challenges, counters and rate limits are shared, so
/// a balancer may send each request to either.
final class TouchLoginPostgresTests: XCTestCase {
    func testTwoInstancesShareChallengesCountersAndLimits() throws {
        let database = try PostgresTestDatabase()
        let a = try LoginServerProcess(["--account-failure-limit", "3"], postgres: database.url)
        let b = try LoginServerProcess(["--account-failure-limit", "3", "--origin", a.baseURL], postgres: database.url)
        XCTAssertEqual((try a.http("GET", "/health").1 as? [String: Any])?["storage"] as? String, "postgresql")

        // Account and device made through A; the login's options from A, its answer to B.
        let (created, session, _) = try a.http(
            "POST",
            "/api/accounts",
            json: ["username": "erin", "password": "correct horse"]
        )
        XCTAssertEqual(created, 201)
        let token = (session as! [String: Any])["token"] as! String
        let (_, options, _) = try a.http("POST", "/api/devices/options", json: [String: Any](), token: token)
        var authenticator = SoftwareAuthenticator(origin: a.baseURL)
        let registration = try authenticator.registration(
            options: (options as! [String: Any])["publicKey"] as! [String: Any]
        )
        XCTAssertEqual(
            try b.http("POST", "/api/devices", json: ["credential": registration], token: token).0,
            201,
            "B knows A's session and challenge"
        )

        let (_, loginOptions, _) = try a.http("POST", "/api/passkey/options", json: ["username": "erin"])
        let assertion = try authenticator.assertion(
            options: (loginOptions as! [String: Any])["publicKey"] as! [String: Any]
        )
        let (status, answer, _) = try b.http("POST", "/api/passkey/login", json: ["credential": assertion])
        XCTAssertEqual(status, 200, "\(String(describing: answer))")
        XCTAssertEqual(
            LoginServerProcess.code(try a.http("POST", "/api/passkey/login", json: ["credential": assertion]).1),
            "challenge_unknown",
            "the replay at the other instance finds the challenge used"
        )
        XCTAssertEqual(try database.scalar("SELECT sign_count FROM credential"), "1")

        // Failures counted on both instances add up.
        for server in [a, b, a] {
            XCTAssertEqual(
                LoginServerProcess.code(
                    try server.http("POST", "/api/session", json: ["username": "erin", "password": "guess"]).1
                ),
                "invalid_credentials"
            )
        }
        XCTAssertEqual(
            LoginServerProcess.code(
                try b.http("POST", "/api/session", json: ["username": "erin", "password": "correct horse"]).1
            ),
            "rate_limited"
        )
        XCTAssertFalse(try database.scalar("SELECT password_hash FROM account").contains("correct horse"))
    }

    func testTheClientFlowAgainstPostgreSQL() throws {
        let database = try PostgresTestDatabase()
        let enclave = try TestEnclave(.with { $0.sensor = .faceID })
        let server = try LoginServerProcess(postgres: database.url)
        let client = LoginClient(enclave: enclave, server: server)
        try client.signUpAndEnable()
        try enclave.queue(.match)
        XCTAssertTrue(try client.run([]).stdout.contains("with your fingerprint"))
        XCTAssertEqual(try database.scalar("SELECT count(*) FROM credential"), "1")
    }
}
