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
        abstract: "The fingerprint-login server: password accounts, device binding and passkey login (WebAuthn shapes).",
        subcommands: [Serve.self, LiftLock.self], defaultSubcommand: Serve.self)
}

/// Where the accounts are: one SQLite file, or a PostgreSQL several instances share.
struct StorageOptions: ParsableArguments {
    @Option(help: "SQLite database file (default: $XDG_DATA_HOME/touchlogin/server.sqlite).") var database: String?
    @Option(help: "Use PostgreSQL instead of SQLite (several instances can share it): postgres://user:password@host:port/database, or $TOUCHLOGIN_POSTGRES_URL.")
    var postgres: String?

    var postgresURL: String? { postgres ?? ProcessInfo.processInfo.environment["TOUCHLOGIN_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 } }
    var sqlitePath: String { database ?? Self.defaultDatabasePath() }

    static func defaultDatabasePath() -> String {
        let environment = ProcessInfo.processInfo.environment
        let data = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? ((environment["HOME"] ?? NSTemporaryDirectory()) + "/.local/share")
        return data + "/touchlogin/server.sqlite"
    }
}

/// The operator's reset of a password path locked after too many wrong passwords.
struct LiftLock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lift-lock", abstract: "Let an account's password be tried again after it locked (its owner was verified another way).")
    @OptionGroup var storage: StorageOptions
    @Argument(help: "The account's username.") var username: String

    func run() async throws {
        let logger = Logger(label: "touchlogin-server")
        if let url = storage.postgresURL {
            let client = try PostgresLoginStore.client(url: url)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await client.run() }
                let store = PostgresLoginStore(client: client, logger: logger)
                try await store.migrate()
                try await LoginService(store: store, configuration: ServerConfiguration()).liftPasswordLock(username: username)
                group.cancelAll()
            }
        } else {
            let store = try SQLiteLoginStore(path: storage.sqlitePath)
            try await store.migrate()
            try await LoginService(store: store, configuration: ServerConfiguration()).liftPasswordLock(username: username)
        }
        print("The password of \(username) may be tried again.")
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Serve the login API and page (the default).")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on.") var port = 8080
    @OptionGroup var storage: StorageOptions
    @Option(help: "Relying party ID: the domain the credentials belong to.") var rpID = "localhost"
    @Option(name: .customLong("origin"), help: "An origin whose logins are accepted (repeatable; default http://localhost:<port> for the rp-id localhost, else https://<rp-id>).")
    var origins: [String] = []
    @Option(help: "Seconds a session lasts.") var sessionLifetime: Double = 3600
    @Option(help: "Seconds a WebAuthn challenge stays valid.") var challengeLifetime: Double = 120
    @Option(help: "scrypt cost (log2 N, r = 8) for new password hashes, 10…20; 17 = 128 MiB a check.") var passwordCost = PasswordHasher.defaultCost
    @Option(help: "Requests that sign up or log in allowed per client address (IPv6: per /64) per minute, all at once if need be.") var addressLimit = 60
    @Option(help: "Wrong passwords per account before each further attempt waits (5 s, doubling to 60 s).") var accountFailureLimit = 5
    @Option(help: "Consecutive wrong passwords after which the account's password path locks until a passkey login or `touchlogin-server lift-lock USERNAME`.")
    var passwordLockAfter = 100
    @Option(name: .customLong("trusted-proxy"), help: "A proxy (address or CIDR network, repeatable) whose Forwarded / X-Forwarded-For header names the client.")
    var trustedProxies: [String] = []
    @Option(help: "Seconds after typing the password in which a session may bind or revoke devices.") var stepUpWindow: Double = 300
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"

    func validate() throws {
        guard (10...20).contains(passwordCost) else { throw ValidationError("--password-cost must be 10…20") }
        guard sessionLifetime > 0, challengeLifetime > 0 else { throw ValidationError("lifetimes must be positive") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
        guard addressLimit > 0, accountFailureLimit >= 0, passwordLockAfter > accountFailureLimit else {
            throw ValidationError("limits must be positive, and --password-lock-after above --account-failure-limit")
        }
        guard stepUpWindow > 0 else { throw ValidationError("--step-up-window must be positive") }
        for proxy in trustedProxies where IPNetwork(proxy) == nil { throw ValidationError("--trusted-proxy \(proxy) is not an address or a CIDR network") }
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
        config.rateLimits.perAddress = .perMinute(addressLimit)
        config.rateLimits.passwordPerAccount.freeFailures = accountFailureLimit
        config.rateLimits.passwordPerAccount.lockAfter = passwordLockAfter
        config.clientAddress = ClientAddress(trustedProxies: trustedProxies.compactMap(IPNetwork.init))
        config.stepUpWindow = stepUpWindow

        let relyingParty = config.relyingParty
        let postgresURL = storage.postgresURL
        let store: any LoginStore
        var services: [any Service] = []
        let path: String
        if let postgresURL {
            let client = try PostgresLoginStore.client(url: postgresURL)
            services.append(client)
            store = PostgresLoginStore(client: client, logger: logger)
            path = postgresURL.replacingOccurrences(of: #"://[^@/]*@"#, with: "://…@", options: .regularExpression)  // no password in logs
        } else {
            path = storage.sqlitePath
            let sqlite = try SQLiteLoginStore(path: path)
            try await sqlite.migrate()
            store = sqlite
        }
        let service = LoginService(store: store, configuration: config, logger: logger)
        services.append(ExpiredRecordsCleanup(service: service, logger: logger))
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
}

/// Expired sessions and challenges, and failure records idle for a month, removed every minute
/// off the login path (the expiry columns are indexed).
struct ExpiredRecordsCleanup: Service {
    let service: LoginService
    let logger: Logger

    func run() async throws {
        // A shutdown cancels the wait: that is this service's normal end, not a failure (a thrown
        // CancellationError would make the whole server exit 1).
        await cancelWhenGracefulShutdown {
            while (try? await Task.sleep(for: .seconds(60))) != nil {
                do { try await service.removeExpired() } catch { logger.warning("removing expired records failed", metadata: ["error": "\(error)"]) }
            }
        }
    }
}
