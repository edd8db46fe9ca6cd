import Foundation
import NIOSSL
import PostgresNIO

/// What a `postgres://` URL asks for, after libpq: `postgres://user:password@host:port/db`, or
/// `?host=/run/postgresql` for a Unix socket, and TLS by `sslmode` — `disable` (the default here:
/// a database on the same machine or a private network), `require` (encrypted; with
/// `sslrootcert` the certificate must chain to it, as libpq does, else any certificate: a passive
/// listener only is kept out), `verify-ca` (the certificate chains to `sslrootcert`) or
/// `verify-full` (and names the host). Our choices, stricter than libpq: the verify modes need
/// `sslrootcert` (the roots to trust, named: pass the system bundle to trust public CAs; else
/// any public certificate would do for `verify-ca`), and `allow` and `prefer`, which fall back to
/// plain text when TLS fails (an attacker in the path can make it fail), are refused. With a
/// host name, `verify-full` also accepts a certificate naming the IP address connected to
/// (swift-nio-ssl's check; libpq checks IP names only for IP hosts).
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
            throw LoginServerError(.storeConfiguration, "not a postgres:// URL")
        }
        let query = Dictionary(
            (url.queryItems ?? []).map { ($0.name, $0.value ?? "") },
            uniquingKeysWith: { _, b in b }
        )
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
            throw LoginServerError(
                .storeConfiguration,
                "sslmode=\(mode) is not one of disable, require, verify-ca, verify-full (allow and prefer fall back to plain text, so they are not offered)"
            )
        }
        self.tls = tls
        rootCertificates = query["sslrootcert"].flatMap { $0.isEmpty ? nil : $0 }
        if case .socket = endpoint, tls != .disable {
            throw LoginServerError(
                .storeConfiguration,
                "sslmode=\(mode) with a Unix socket: TLS is for TCP connections"
            )
        }
        if (tls == .verifyCA || tls == .verifyFull) && rootCertificates == nil {
            throw LoginServerError(
                .storeConfiguration,
                "sslmode=\(mode) needs sslrootcert=FILE, the certificates to trust (the system's bundle, /etc/ssl/certs/ca-certificates.crt, to trust public CAs)"
            )
        }
    }

    /// postgres-nio's client configuration.
    public func clientConfiguration() throws -> PostgresClient.Configuration {
        switch endpoint {
        case .socket(let path):
            return .init(unixSocketPath: path, username: username, password: password, database: database)
        case .tcp(let host, let port):
            return .init(
                host: host,
                port: port,
                username: username,
                password: password,
                database: database,
                tls: try tlsConfiguration()
            )
        }
    }

    func tlsConfiguration() throws -> PostgresClient.Configuration.TLS {
        guard tls != .disable else { return .disable }
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        switch tls {
        case .disable: break
        case .require: configuration.certificateVerification = rootCertificates == nil ? .none : .noHostnameVerification
        case .verifyCA: configuration.certificateVerification = .noHostnameVerification
        case .verifyFull: configuration.certificateVerification = .fullVerification
        }
        if let rootCertificates {
            let roots: [NIOSSLCertificate]
            do { roots = try NIOSSLCertificate.fromPEMFile(rootCertificates) } catch {
                throw LoginServerError(
                    .storeConfiguration,
                    "sslrootcert \(rootCertificates) is not a readable PEM file of certificates"
                )
            }
            guard !roots.isEmpty else {
                throw LoginServerError(.storeConfiguration, "sslrootcert \(rootCertificates) holds no certificate")
            }
            configuration.trustRoots = .certificates(roots)
        }
        // Made here so that a wrong setting fails at start, with its reason, rather than in the
        // connection pool, which retries a failing connection without end.
        do { _ = try NIOSSLContext(configuration: configuration) } catch {
            throw LoginServerError(.storeConfiguration, "the TLS settings are not usable: \(error)")
        }
        return .require(configuration)
    }
}
