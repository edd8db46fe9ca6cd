import ArgumentParser
import EnclaveProtocol
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
        abstract:
            "The fingerprint-login server: password accounts, device binding and passkey login (WebAuthn shapes).",
        subcommands: [Serve.self, Admin.self, LiftLock.self],
        defaultSubcommand: Serve.self
    )
}

/// Where the accounts are: one SQLite file, or a PostgreSQL several instances share.
struct StorageOptions: ParsableArguments {
    @Option(help: "SQLite database file (default: $XDG_DATA_HOME/touchlogin/server.sqlite).") var database: String?
    @Option(
        help:
            "Use PostgreSQL instead of SQLite (several instances can share it): postgres://user:password@host:port/database[?sslmode=verify-full&sslrootcert=ca.pem], or $TOUCHLOGIN_POSTGRES_URL."
    )
    var postgres: String?

    var postgresURL: String? {
        postgres ?? ProcessInfo.processInfo.environment["TOUCHLOGIN_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }
    var sqlitePath: String { database ?? Self.defaultDatabasePath() }

    static func defaultDatabasePath() -> String {
        let environment = ProcessInfo.processInfo.environment
        let data =
            environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? NSTemporaryDirectory()) + "/.local/share")
        return data + "/touchlogin/server.sqlite"
    }
}

extension StorageOptions {
    /// Runs `body` with a login service on the configured store (the operator's commands; a
    /// running server may share it: SQLite in WAL mode and PostgreSQL allow that).
    func withService<T: Sendable>(_ body: @escaping @Sendable (LoginService) async throws -> T) async throws -> T {
        let logger = Logger(label: "touchlogin-server")
        if let url = postgresURL {
            let client = try PostgresLoginStore.client(url: url, logger: logger)
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    await client.run()
                    return nil
                }
                let store = PostgresLoginStore(client: client, logger: logger)
                try await store.migrate()
                defer { group.cancelAll() }
                return try await body(LoginService(store: store, configuration: ServerConfiguration()))
            }
        }
        let store = try SQLiteLoginStore(path: sqlitePath)
        try await store.migrate()
        return try await body(LoginService(store: store, configuration: ServerConfiguration()))
    }
}

/// The operator's reset of a password path locked after too many wrong passwords (also
/// `admin lift-lock`).
struct LiftLock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lift-lock",
        abstract: "Let an account's password be tried again after it locked (its owner was verified another way)."
    )
    @OptionGroup var storage: StorageOptions
    @Argument(help: "The account's username.") var username: String

    func run() async throws {
        let username = self.username
        try await storage.withService { try await $0.liftPasswordLock(username: username) }
        print("The password of \(Printable.field(username)) may be tried again.")
    }
}

/// Times in the operator's commands (users' strings go through `Printable.field`).
enum Printed {
    static func date(_ seconds: Double) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: seconds))
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the login API and page (the default)."
    )

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on.") var port = 8080
    @OptionGroup var storage: StorageOptions
    @Option(help: "Relying party ID: the domain the credentials belong to.") var rpID = "localhost"
    @Option(
        name: .customLong("origin"),
        help:
            "An origin whose logins are accepted (repeatable; default http://localhost:<port> for the rp-id localhost, else https://<rp-id>)."
    )
    var origins: [String] = []
    @Option(help: "Seconds a session lasts.") var sessionLifetime: Double = 3600
    @Option(help: "Seconds a WebAuthn challenge stays valid.") var challengeLifetime: Double = 120
    @Option(help: "scrypt cost (log2 N, r = 8) for new password hashes, 10…20; 17 = 128 MiB a check.")
    var passwordCost = PasswordHasher.defaultCost
    @Option(
        help:
            "Requests that sign up or log in allowed per client address (IPv6: per /64) per minute, all at once if need be."
    ) var addressLimit = 60
    @Option(help: "Wrong passwords per account before each further attempt waits (5 s, doubling to 60 s).")
    var accountFailureLimit = 5
    @Option(
        help:
            "Consecutive wrong passwords after which the account's password path locks until a passkey login or `touchlogin-server lift-lock USERNAME`."
    )
    var passwordLockAfter = 100
    @Option(
        name: .customLong("trusted-proxy"),
        help: "A proxy (address or CIDR network, repeatable) whose forwarding header names the client."
    )
    var trustedProxies: [String] = []
    @Option(
        name: .customLong("forwarded-header"),
        help:
            "The header the trusted proxies write: x-forwarded-for (nginx, HAProxy, Caddy, Traefik, cloud balancers) or forwarded (RFC 7239). The other is ignored: a proxy passes it on as the client sent it."
    )
    var forwardedHeader: ClientAddress.Header = .xForwardedFor
    @Option(help: "Seconds after typing the password in which a session may bind or revoke devices.") var stepUpWindow:
        Double = 300
    @Option(
        help:
            "The least time, in seconds, an answer to the passkey options for a name takes, so that its time does not tell which names have a passkey (0: off)."
    )
    var optionsFloor: Double = 0.005
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"
    @Option(
        help: ArgumentHelp(
            "Bind a new device or passkey only when a system laenclaved attests it to a root in this PEM file (`lactl attestation-root` on each machine; several roots may share the file).",
            valueName: "roots.pem"
        )
    )
    var requireAttestation: String?
    @Flag(
        help:
            "With --require-attestation: let registrations that say they are browser passkeys through unattested (then the option only guarantees that keys shown as attested are)."
    )
    var allowUnattestedPasskeys = false
    @Flag(help: "With --require-attestation: accept user-mode daemons' attestations (the user's own word).")
    var attestationAllowsUserDaemons = false
    @Flag(
        help: "With --require-attestation: accept keys of daemons that take simulated touches (tests and demos only)."
    ) var attestationAllowsSimulation = false
    @Option(
        help: ArgumentHelp(
            "Certify the attestation keys of TPMs whose endorsement certificate chains to a TPM maker's certificate in this PEM file, and accept `tpm` attestations made with them (GET /api/tpm/root prints this server's attestation-key CA).",
            valueName: "makers.pem"
        )
    )
    var tpmMakerRoots: String?
    @Flag(
        help:
            "With --tpm-maker-roots: bind a key (of any kind) only with a `tpm` attestation (the TPM made it and it never leaves it)."
    )
    var requireHardwareRoot = false

    func validate() throws {
        guard (10...20).contains(passwordCost) else { throw ValidationError("--password-cost must be 10…20") }
        guard sessionLifetime > 0, challengeLifetime > 0 else { throw ValidationError("lifetimes must be positive") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
        guard addressLimit > 0, accountFailureLimit >= 0, passwordLockAfter > accountFailureLimit else {
            throw ValidationError("limits must be positive, and --password-lock-after above --account-failure-limit")
        }
        guard stepUpWindow > 0 else { throw ValidationError("--step-up-window must be positive") }
        guard (0...1).contains(optionsFloor) else { throw ValidationError("--options-floor must be 0 to 1 second") }
        for proxy in trustedProxies where IPNetwork(proxy) == nil {
            throw ValidationError("--trusted-proxy \(proxy) is not an address or a CIDR network")
        }
        if requireAttestation == nil
            && (allowUnattestedPasskeys || attestationAllowsUserDaemons || attestationAllowsSimulation)
        {
            throw ValidationError(
                "--allow-unattested-passkeys, --attestation-allows-user-daemons and --attestation-allows-simulation need --require-attestation"
            )
        }
        if requireHardwareRoot && tpmMakerRoots == nil {
            throw ValidationError("--require-hardware-root needs --tpm-maker-roots")
        }
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
        config.clientAddress = ClientAddress(
            trustedProxies: trustedProxies.compactMap(IPNetwork.init),
            header: forwardedHeader
        )
        config.stepUpWindow = stepUpWindow
        config.optionsFloor = optionsFloor
        if let requireAttestation {
            let trust: AttestationTrust
            do {
                trust = try AttestationTrust(
                    pem: try String(contentsOfFile: requireAttestation, encoding: .utf8),
                    allowUnattestedPasskeys: allowUnattestedPasskeys,
                    allowUserDaemons: attestationAllowsUserDaemons,
                    allowSimulation: attestationAllowsSimulation
                )
            } catch {
                throw ValidationError("--require-attestation \(requireAttestation): \(error)")
            }
            config.attestation = trust
            logger.info(
                "new credentials must be attested",
                metadata: ["roots": "\(trust.roots.count)", "unattested passkeys": "\(allowUnattestedPasskeys)"]
            )
        }
        if let tpmMakerRoots {
            do {
                config.tpmAttestation = try TPMAttestationPolicy(
                    pem: try String(contentsOfFile: tpmMakerRoots, encoding: .utf8),
                    requireHardwareRoot: requireHardwareRoot
                )
            } catch {
                throw ValidationError("--tpm-maker-roots \(tpmMakerRoots): \(error)")
            }
            logger.info(
                "TPM attestation keys are certified",
                metadata: ["makers": "\(tpmMakerRoots)", "hardware root required": "\(requireHardwareRoot)"]
            )
        }

        let relyingParty = config.relyingParty
        let postgresURL = storage.postgresURL
        let store: any LoginStore
        var services: [any Service] = []
        let path: String
        if let postgresURL {
            let client = try PostgresLoginStore.client(url: postgresURL, logger: logger)
            services.append(client)
            store = PostgresLoginStore(client: client, logger: logger)
            // no password in logs
            path = postgresURL.replacingOccurrences(of: #"://[^@/]*@"#, with: "://…@", options: .regularExpression)
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
                logger.info(
                    "listening",
                    metadata: [
                        "address": "\(channel.localAddress?.description ?? "?")", "storage": "\(store.kind)",
                        "database": "\(path)",
                        "rp": "\(relyingParty.id)", "origins": "\(relyingParty.origins.joined(separator: ","))",
                    ]
                )
                print("touchlogin-server listening on http://\(host):\(channel.localAddress?.port ?? port)")
                fflush(nil)  // every output stream: the global stdout is not reachable from a Sendable closure
            },
            logger: logger
        )
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
                do { try await service.removeExpired() } catch {
                    logger.warning("removing expired records failed", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}

/// The operator's tools: find an account, revoke a device, lift a locked password path. They
/// work on the store directly (the server may be running: SQLite WAL and PostgreSQL allow it).
struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The operator's tools: look an account up, revoke a device, lift a locked password path.",
        subcommands: [AccountCommand.self, Revoke.self, LiftLock.self]
    )

    struct AccountCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "account",
            abstract: "An account's devices and recent activity."
        )
        @OptionGroup var storage: StorageOptions
        @Argument(help: "The account's username.") var username: String
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let username = self.username
            let report = try await storage.withService { try await $0.operatorAccount(username: username) }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                print(Printable.json(String(decoding: try encoder.encode(report), as: UTF8.self)))
                return
            }
            print("account   \(Printable.field(report.username)), created \(Printed.date(report.createdAt))")
            print("devices   \(report.devices.isEmpty ? "none" : "")")
            for d in report.devices {
                print(
                    "  \(d.id)  \(Printable.field(d.name)), added \(Printed.date(d.createdAt)), last used \(d.lastUsedAt.map(Printed.date) ?? "never")"
                )
                if let attested = d.attestedKey { print("      attested: \(Printable.field(attested))") }
            }
            print("activity")
            for a in report.activity ?? [] {
                print(
                    "  \(Printed.date(a.at))  \(a.kind)\(a.deviceName.map { " " + Printable.field($0) } ?? "")  from \(Printable.field(a.address))"
                )
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke one device of an account (its fingerprint login ends at once)."
        )
        @OptionGroup var storage: StorageOptions
        @Argument(help: "The account's username.") var username: String
        @Argument(help: "The device's ID (base64url, as `admin account` lists it).") var device: String

        func run() async throws {
            let (username, device) = (self.username, self.device)
            let revoked = try await storage.withService {
                try await $0.operatorRevoke(username: username, credentialID: device)
            }
            print("Revoked \(Printable.field(revoked.name)) of \(Printable.field(username)).")
        }
    }
}

extension ClientAddress.Header: ExpressibleByArgument {}
