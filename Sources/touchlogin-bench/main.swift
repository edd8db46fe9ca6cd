import Crypto
import Foundation
import PostgresNIO
import TouchLoginAPI
import TouchLoginServer
import WebAuthn

// Biometric logins per second through the server's rules and store (options → assertion verify →
// sign-counter update → session), with SQLite and (given a URL) PostgreSQL, against the ECDSA
// P-256 verify rate on the same machine as the ceiling.
//
// usage: touchlogin-bench [LOGINS] [postgres://… admin URL for a throw-away database]
//        touchlogin-bench http CLIENTS SECONDS URL [URL…] [--pid PID…]   (full logins over HTTP)
//        touchlogin-bench timing [ROUNDS] [--direct] [--no-floor]   (what response times tell about names; exits 1 if anything)

if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "http" {
    var arguments = Array(CommandLine.arguments.dropFirst(2))
    var pids: [Int32] = []
    if let flag = arguments.firstIndex(of: "--pid") {
        pids = arguments[(flag + 1)...].compactMap { Int32($0) }
        arguments.removeSubrange(flag...)
    }
    guard arguments.count >= 3, let clients = Int(arguments[0]), let seconds = Double(arguments[1]) else {
        print("usage: touchlogin-bench http CLIENTS SECONDS URL [URL…] [--pid PID…]")
        exit(2)
    }
    try await HTTPBench(
        urls: arguments[2...].compactMap(URL.init(string:)),
        clients: clients,
        seconds: seconds,
        serverPIDs: pids
    ).run()
    exit(0)
}

if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "timing" {
    let rounds = CommandLine.arguments.count > 2 ? Int(CommandLine.arguments[2]) ?? 1000 : 1000
    let oracle = TimingOracle(
        rounds: rounds,
        direct: CommandLine.arguments.contains("--direct"),
        withoutFloor: CommandLine.arguments.contains("--no-floor")
    )
    exit(try await oracle.run() ? 0 : 1)
}

let logins = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 2000 : 2000
let postgresURL = CommandLine.arguments.count > 2 ? CommandLine.arguments[2] : nil

struct Figures {
    var perSecond: Double
    var p50: Double
    var p99: Double
}

func ecdsaVerifyRate(seconds: Double = 2) -> Double {
    let key = P256.Signing.PrivateKey()
    let message = Data((0..<100).map { UInt8($0) })
    let signature = try! key.signature(for: message)
    var count = 0
    let start = Date()
    while Date().timeIntervalSince(start) < seconds {
        for _ in 0..<100 { if key.publicKey.isValidSignature(signature, for: message) { count += 1 } }
    }
    return Double(count) / Date().timeIntervalSince(start)
}

/// Logins one after another; only the server's side is timed (the authenticator's signing is not).
func loginRate(_ store: any LoginStore, count: Int) async throws -> Figures {
    try await store.migrate()
    var configuration = ServerConfiguration()
    configuration.relyingParty = RelyingParty(id: "localhost", origins: ["http://localhost:8080"])
    configuration.passwordCost = 10
    configuration.rateLimits.perAddress = .init(capacity: 1e12, refillPerSecond: 1e9)
    let service = LoginService(store: store, configuration: configuration)
    let username = "bench-\(UInt32.random(in: 0...UInt32.max))"
    let session = try await service.createAccount(
        CreateAccountRequest(username: username, password: "correct horse"),
        address: "bench"
    )
    let (s, account) = try await service.authenticate(bearer: session.token)
    let key = P256.Signing.PrivateKey()
    let credentialID = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
    let creation = try await service.registrationOptions(session: s, account: account, RegistrationOptionsRequest())
    let clientData = CollectedClientData(
        type: "webauthn.create",
        challenge: creation.publicKey.challenge,
        origin: "http://localhost:8080"
    ).jsonData()
    let authData = AuthenticatorData(
        rpID: "localhost",
        flags: [.userPresent, .userVerified],
        signCount: 0,
        attestedCredential: .init(credentialID: credentialID, publicKey: COSEKey(key.publicKey))
    )
    let attestation = AttestationObject.makeAttestationObject(
        authenticatorData: authData,
        format: .none,
        clientDataHash: Data(SHA256.hash(data: clientData)),
        sign: { _ in Data() }
    )
    let id = credentialID.base64URLEncodedString()
    _ = try await service.register(
        session: s,
        account: account,
        RegistrationRequest(
            deviceName: "bench",
            credential: RegistrationResponseJSON(
                id: id,
                rawId: id,
                response: AuthenticatorAttestationResponseJSON(
                    clientDataJSON: clientData.base64URLEncodedString(),
                    attestationObject: attestation.base64URLEncodedString()
                )
            )
        ),
        address: "bench"
    )

    var latencies: [Double] = []
    latencies.reserveCapacity(count)
    for counter in 1...UInt32(count) {
        let t0 = DispatchTime.now().uptimeNanoseconds
        let options = try await service.assertionOptions(AssertionOptionsRequest(username: username), address: "bench")
        let t1 = DispatchTime.now().uptimeNanoseconds
        let clientData = CollectedClientData(
            type: "webauthn.get",
            challenge: options.publicKey.challenge,
            origin: "http://localhost:8080"
        ).jsonData()
        let authData = AuthenticatorData(rpID: "localhost", flags: [.userPresent, .userVerified], signCount: counter)
        let signature = try key.signature(for: authData.raw + Data(SHA256.hash(data: clientData))).derRepresentation
        let request = AssertionRequest(
            credential: AuthenticationResponseJSON(
                id: id,
                rawId: id,
                response: AuthenticatorAssertionResponseJSON(
                    clientDataJSON: clientData.base64URLEncodedString(),
                    authenticatorData: authData.raw.base64URLEncodedString(),
                    signature: signature.base64URLEncodedString()
                )
            )
        )
        let t2 = DispatchTime.now().uptimeNanoseconds
        _ = try await service.passkeyLogin(request, address: "bench")
        let t3 = DispatchTime.now().uptimeNanoseconds
        latencies.append(Double((t1 - t0) + (t3 - t2)) / 1e9)
    }
    latencies.sort()
    let total = latencies.reduce(0, +)
    return Figures(perSecond: Double(count) / total, p50: latencies[count / 2], p99: latencies[count * 99 / 100])
}

func show(_ name: String, _ f: Figures, ceiling: Double) {
    print(
        String(
            format: "%-11@ %8.0f logins/s  p50 %6.0f µs  p99 %6.0f µs  (%.1f%% of the verify ceiling)",
            name as NSString,
            f.perSecond,
            f.p50 * 1e6,
            f.p99 * 1e6,
            100 * f.perSecond / ceiling
        )
    )
}

let ceiling = ecdsaVerifyRate()
print(String(format: "ECDSA P-256 verify (swift-crypto): %.0f/s on one core", ceiling))
let directory = NSTemporaryDirectory() + "touchlogin-bench-\(getpid())"
defer { try? FileManager.default.removeItem(atPath: directory) }
let sqlite = try SQLiteLoginStore(path: directory + "/bench.sqlite")
show("SQLite", try await loginRate(sqlite, count: logins), ceiling: ceiling)

if let postgresURL {
    let client = try PostgresLoginStore.client(url: postgresURL)
    let running = Task { await client.run() }
    show("PostgreSQL", try await loginRate(PostgresLoginStore(client: client), count: logins), ceiling: ceiling)
    running.cancel()
}
