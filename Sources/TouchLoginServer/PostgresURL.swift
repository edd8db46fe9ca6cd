import Foundation
import NIOSSL
import PostgresNIO

/// What a `postgres://` URL asks for, as libpq reads it: `postgres://user:password@host:port/db`,
/// or `?host=/run/postgresql` for a Unix socket, and TLS by `sslmode` — `disable` (the default
/// here: a database on the same machine or a private network), `require` (encrypted, any
/// certificate: protects against a passive listener only), `verify-ca` (the server's certificate
/// chains to `sslrootcert`, or to the system's roots without it) or `verify-full` (and names the
/// host). Our choice: libpq's `allow` and `prefer` fall back to plain text when TLS fails, which
/// an attacker in the path can force, so they are refused rather than honoured.
public struct PostgresURL: Equatable, Sendable {
    public enum Endpoint: Equatable, Sendable {
        case tcp(host: String, port: Int)
        case socket(path: String)
    }
    public enum TLSMode: String, Equatable, Sendable, CaseIterable {
        case disable, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    public var endpoint: Endpoint
    public var username: String
    public var password: String?
    public var database: String?
    public var tls: TLSMode
    /// PEM file of the certificates to trust (`sslrootcert`); nil: the system's.
    public var rootCertificates: String?

    public init(_ text: String) throws {
        guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? "") else {
            throw LoginStoreConfigurationError("not a postgres:// URL")
        }
        let query = Dictionary((url.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, b in b })
        let path = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        database = path.isEmpty ? nil : path
        username = url.user ?? query["user"] ?? "postgres"
        password = url.password
        let port = url.port ?? 5432
        if let socketDirectory = query["host"], socketDirectory.hasPrefix("/") {
            endpoint = .socket(path: "\(socketDirectory)/.s.PGSQL.\(port)")
        } else {
            endpoint = .tcp(host: url.host ?? "localhost", port: port)
        }
        let mode = query["sslmode"] ?? TLSMode.disable.rawValue
        guard let tls = TLSMode(rawValue: mode) else {
            throw LoginStoreConfigurationError("sslmode=\(mode) is not one of disable, require, verify-ca, verify-full (allow and prefer fall back to plain text, so they are not offered)")
        }
        self.tls = tls
        rootCertificates = query["sslrootcert"].flatMap { $0.isEmpty ? nil : $0 }
        if case .socket = endpoint, tls != .disable {
            throw LoginStoreConfigurationError("sslmode=\(mode) with a Unix socket: TLS is for TCP connections")
        }
    }

    /// postgres-nio's client configuration.
    public func clientConfiguration() throws -> PostgresClient.Configuration {
        switch endpoint {
        case .socket(let path):
            return .init(unixSocketPath: path, username: username, password: password, database: database)
        case .tcp(let host, let port):
            return .init(host: host, port: port, username: username, password: password, database: database, tls: try tlsConfiguration())
        }
    }

    func tlsConfiguration() throws -> PostgresClient.Configuration.TLS {
        guard tls != .disable else { return .disable }
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        switch tls {
        case .disable: break
        case .require: configuration.certificateVerification = .none
        case .verifyCA: configuration.certificateVerification = .noHostnameVerification
        case .verifyFull: configuration.certificateVerification = .fullVerification
        }
        if let rootCertificates {
            guard FileManager.default.isReadableFile(atPath: rootCertificates) else {
                throw LoginStoreConfigurationError("sslrootcert \(rootCertificates) is not a readable file")
            }
            configuration.trustRoots = .file(rootCertificates)
        }
        return .require(configuration)
    }
}
