import Crypto
import Foundation
import Logging
import PostgresNIO
import TouchLoginServer
import X509
import XCTest

/// `postgres://` URLs as libpq reads them, TLS by `sslmode`, and against the test PostgreSQL
/// (which scripts/setup-postgres serves with TLS): what each mode really does on the wire.
final class PostgresURLTests: XCTestCase {
    func testTheURLSaysWhereWhoAndHowEncrypted() throws {
        let table: [(String, PostgresURL.Endpoint, PostgresURL.TLSMode, String?)] = [
            ("postgres://u:p@db.example:6543/login", .tcp(host: "db.example", port: 6543), .disable, nil),
            ("postgresql://u@db.example/login?sslmode=require", .tcp(host: "db.example", port: 5432), .require, nil),
            (
                "postgres://u@db.example/login?sslmode=verify-ca&sslrootcert=/etc/ca.pem",
                .tcp(host: "db.example", port: 5432), .verifyCA, "/etc/ca.pem"
            ),
            (
                "postgres://u@db.example/login?sslmode=verify-full&sslrootcert=/etc/ca.pem",
                .tcp(host: "db.example", port: 5432), .verifyFull, "/etc/ca.pem"
            ),
            (
                "postgres:///login?host=/run/postgresql&user=u", .socket(path: "/run/postgresql/.s.PGSQL.5432"),
                .disable, nil
            ),
        ]
        for (text, endpoint, tls, roots) in table {
            let url = try PostgresURL(text)
            XCTAssertEqual(url.endpoint, endpoint, text)
            XCTAssertEqual(url.tls, tls, text)
            XCTAssertEqual(url.rootCertificates, roots, text)
            XCTAssertEqual(url.database, "login", text)
            XCTAssertEqual(url.username, "u", text)
        }
        // Modes that fall back to plain text when TLS fails (an attacker in the path makes it
        // fail) are refused, as is TLS on a Unix socket, a root file that cannot be read, and
        // anything that is not a postgres URL.
        // So are the verify modes without sslrootcert (they would trust any public certificate).
        for text in [
            "postgres://u@h/db?sslmode=prefer", "postgres://u@h/db?sslmode=allow", "postgres://u@h/db?sslmode=verify",
            "postgres://u@h/db?sslmode=verify-ca", "postgres://u@h/db?sslmode=verify-full",
            "postgres:///db?host=/run/postgresql&sslmode=require", "mysql://u@h/db",
        ] {
            XCTAssertThrowsError(try PostgresURL(text), text)
        }
        for roots in ["/nonexistent/ca.pem", NSTemporaryDirectory()] {
            XCTAssertThrowsError(
                try PostgresURL("postgres://u@h/db?sslmode=verify-full&sslrootcert=\(roots)").clientConfiguration(),
                "\(roots): at start, not in the pool"
            )
        }
    }

    /// Whether the connection `url` makes is encrypted, as the server sees it (pg_stat_ssl); nil
    /// when none is made within 5 s (postgres-nio's pool retries a refused connection rather than
    /// failing the query; a local server answers in milliseconds).
    private func encrypted(_ url: String) async throws -> Bool? {
        let client = try PostgresLoginStore.client(url: url)
        return try await withThrowingTaskGroup(of: Bool?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(5))
                return nil
            }
            group.addTask {
                let rows = try await client.query(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    logger: Logger(label: "tls-test")
                )
                for try await ssl in rows.decode(Bool.self) { return ssl }
                return false
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    func testEachModeOnTheWire() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let base = environment["TOUCHLOGIN_TEST_POSTGRES"], !base.isEmpty,
            let ca = environment["TOUCHLOGIN_TEST_POSTGRES_CA"]
        else {
            throw XCTSkip("no test PostgreSQL with TLS: run through scripts/test")
        }
        let plain = try await encrypted(base)
        XCTAssertEqual(plain, false, "sslmode absent: plain, as before")
        // The test server's certificate names localhost only: verify-full checks the name.
        let byName = base.replacingOccurrences(of: "@127.0.0.1:", with: "@localhost:")
        XCTAssertNotEqual(byName, base)
        for (url, expected) in [
            (base + "?sslmode=require", true), (base + "?sslmode=require&sslrootcert=\(ca)", true),
            (base + "?sslmode=verify-ca&sslrootcert=\(ca)", true),
            (byName + "?sslmode=verify-full&sslrootcert=\(ca)", true),
            (base + "?sslmode=verify-full&sslrootcert=\(ca)", nil),
        ] {
            let tls = try? await encrypted(url)
            XCTAssertEqual(tls ?? nil, expected, url)
        }

        // A server whose certificate does not chain to the roots given (here: another CA's) is
        // refused by every mode given them (require with sslrootcert checks the chain, as libpq's).
        let other = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("another CA") }
        let otherCA = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(other.publicKey),
            notValidBefore: Date() - 60,
            notValidAfter: Date() + 3600,
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
            },
            issuerPrivateKey: .init(other)
        )
        let otherPath = NSTemporaryDirectory() + "other-ca-\(UUID().uuidString).pem"
        try otherCA.serializeAsPEM().pemString.write(toFile: otherPath, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: otherPath) }
        for mode in ["require", "verify-ca"] {
            let connected = try? await encrypted(base + "?sslmode=\(mode)&sslrootcert=\(otherPath)")
            XCTAssertNil(connected ?? nil, "\(mode) connected to a server whose certificate another CA signed")
        }
    }
}
