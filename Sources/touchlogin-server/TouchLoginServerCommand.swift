import ArgumentParser
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceLifecycle
import TouchLoginServer
import WebAuthn

@main
struct TouchLoginServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "touchlogin-server",
        abstract: "The fingerprint-login server: password accounts, device binding and passkey login (WebAuthn shapes).")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on.") var port = 8080
    @Option(help: "SQLite database file (default: $XDG_DATA_HOME/touchlogin/server.sqlite).") var database: String?
    @Option(help: "Use PostgreSQL instead of SQLite (several instances can share it): postgres://user:password@host:port/database, or $TOUCHLOGIN_POSTGRES_URL.")
    var postgres: String?
    @Option(help: "Relying party ID: the domain the credentials belong to.") var rpID = "localhost"
    @Option(name: .customLong("origin"), help: "An origin whose logins are accepted (repeatable; default http://localhost:<port> for the rp-id localhost, else https://<rp-id>).")
    var origins: [String] = []
    @Option(help: "Seconds a session lasts.") var sessionLifetime: Double = 3600
    @Option(help: "Seconds a WebAuthn challenge stays valid.") var challengeLifetime: Double = 120
    @Option(help: "scrypt cost (log2 N) for new password hashes, 10…20.") var passwordCost = 15
    @Option(help: "Login attempts allowed per client address per minute.") var addressLimit = 60
    @Option(help: "Failed logins allowed per account per 5 minutes.") var accountFailureLimit = 5
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"

    func validate() throws {
        guard (10...20).contains(passwordCost) else { throw ValidationError("--password-cost must be 10…20") }
        guard sessionLifetime > 0, challengeLifetime > 0 else { throw ValidationError("lifetimes must be positive") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
        guard addressLimit > 0, accountFailureLimit > 0 else { throw ValidationError("limits must be positive") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "touchlogin-server")
        var config = ServerConfiguration()
        let defaultOrigin = rpID == "localhost" ? "http://localhost:\(port)" : "https://\(rpID)"
        config.relyingParty = RelyingParty(id: rpID, origins: origins.isEmpty ? [defaultOrigin] : origins)
        config.sessionLifetime = sessionLifetime
        config.challengeLifetime = challengeLifetime
        config.passwordCost = passwordCost
        config.rateLimits.perAddress.limit = addressLimit
        config.rateLimits.failuresPerAccount.limit = accountFailureLimit

        let relyingParty = config.relyingParty
        let postgresURL = postgres ?? ProcessInfo.processInfo.environment["TOUCHLOGIN_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
        let store: any LoginStore
        var services: [any Service] = []
        let path: String
        if let postgresURL {
            let client = try PostgresLoginStore.client(url: postgresURL)
            services.append(client)
            store = PostgresLoginStore(client: client, logger: logger)
            path = postgresURL.replacingOccurrences(of: #"://[^@/]*@"#, with: "://…@", options: .regularExpression)  // no password in logs
        } else {
            path = database ?? Self.defaultDatabasePath()
            let sqlite = try SQLiteLoginStore(path: path)
            try await sqlite.migrate()
            store = sqlite
        }
        let service = LoginService(store: store, configuration: config, logger: logger)
        var app = Application(
            router: LoginHTTPServer.router(service),
            configuration: .init(address: .hostname(host, port: port), serverName: "touchlogin-server"),
            services: services,
            onServerRunning: { channel in
                logger.info("listening", metadata: ["address": "\(channel.localAddress?.description ?? "?")", "storage": "\(store.kind)", "database": "\(path)",
                                                     "rp": "\(relyingParty.id)", "origins": "\(relyingParty.origins.joined(separator: ","))"])
                print("touchlogin-server listening on http://\(host):\(channel.localAddress?.port ?? port)")
                fflush(nil)  // every output stream: the global stdout is not reachable from a Sendable closure
            },
            logger: logger)
        if postgresURL != nil { app.beforeServerStarts { try await store.migrate() } }
        try await app.runService()
    }

    static func defaultDatabasePath() -> String {
        let environment = ProcessInfo.processInfo.environment
        let data = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? ((environment["HOME"] ?? NSTemporaryDirectory()) + "/.local/share")
        return data + "/touchlogin/server.sqlite"
    }
}
