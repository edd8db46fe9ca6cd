import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import TouchLoginAPI
import WebAuthn

/// Full passkey logins over HTTP against running servers: each client has its own account and
/// software key, keeps one connection, and loops options → signed assertion → login. Clients
/// are spread over the servers' URLs in turn (two instances on one PostgreSQL: give both).
/// The servers must allow the load from one address (`--address-limit 1000000000`).
struct HTTPBench {
    let urls: [URL]
    let clients: Int
    let seconds: Double
    let serverPIDs: [Int32]

    struct Client {
        let http: TestClient
        let username: String
        let key = P256.Signing.PrivateKey()
        let credentialID = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        let origin: String
        var counter: UInt32 = 0
    }

    func run() async throws {
        let ceiling = ecdsaVerifyRate()
        print(String(format: "ECDSA P-256 verify (swift-crypto): %.0f/s on one core", ceiling))
        let run = "bench\(UInt32.random(in: 0...UInt32.max))"
        var prepared: [Client] = []
        for index in 0..<clients {
            let url = urls[index % urls.count]
            let http = TestClient(host: url.host ?? "127.0.0.1", port: url.port ?? 80)
            http.connect()
            prepared.append(
                try await Self.enrol(
                    Client(http: http, username: "\(run)-\(index)", origin: "http://localhost:\(url.port ?? 80)")
                )
            )
        }
        let cpuBefore = serverPIDs.map(Self.cpuSeconds)
        let ownBefore = Self.ownCPUSeconds()
        let databaseBefore = Self.databaseCPU()
        let start = Date()
        let deadline = start.addingTimeInterval(seconds)
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for client in prepared {
                group.addTask {
                    var client = client
                    var latencies: [Double] = []
                    while Date() < deadline {
                        let t0 = DispatchTime.now().uptimeNanoseconds
                        try await Self.login(&client)
                        latencies.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9)
                    }
                    return latencies
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }.sorted()
        }
        let elapsed = Date().timeIntervalSince(start)
        let cpu = zip(serverPIDs.map(Self.cpuSeconds), cpuBefore).map { $0 - $1 }.reduce(0, +)
        let own = Self.ownCPUSeconds() - ownBefore
        let database = Self.databaseCPUSeconds(since: databaseBefore)
        for client in prepared { try? await client.http.shutdown() }
        guard !latencies.isEmpty else {
            print("no login completed")
            return
        }
        let rate = Double(latencies.count) / elapsed
        print(
            String(
                format:
                    "%d clients, %d server(s): %.0f logins/s  p50 %.1f ms  p99 %.1f ms  (%.1f%% of the verify ceiling)",
                clients,
                urls.count,
                rate,
                latencies[latencies.count / 2] * 1e3,
                latencies[latencies.count * 99 / 100] * 1e3,
                100 * rate / ceiling
            )
        )
        let perLogin = { (seconds: Double) in seconds / Double(latencies.count) * 1e6 }
        if !serverPIDs.isEmpty {
            print(String(format: "server CPU: %.2f cores busy (%.0f µs per login)", cpu / elapsed, perLogin(cpu)))
        }
        if database / elapsed >= 0.01 {  // an idle local cluster beside a SQLite run is not the store
            print(
                String(
                    format: "PostgreSQL CPU (every postgres process here): %.2f cores busy (%.0f µs per login)",
                    database / elapsed,
                    perLogin(database)
                )
            )
        }
        print(String(format: "this client's CPU: %.2f cores busy (%.0f µs per login)", own / elapsed, perLogin(own)))
        if !serverPIDs.isEmpty {
            print(
                String(
                    format: "all of them: %.0f µs per login on %d cores",
                    perLogin(cpu + database + own),
                    ProcessInfo.processInfo.activeProcessorCount
                )
            )
        }
    }

    /// A new account (password), then the client's key bound to it.
    static func enrol(_ client: Client) async throws -> Client {
        let session: SessionResponse = try await call(
            client.http,
            "/api/accounts",
            CreateAccountRequest(username: client.username, password: "correct horse battery")
        )
        let options: RegistrationOptionsResponse = try await call(
            client.http,
            "/api/devices/options",
            RegistrationOptionsRequest(deviceName: "bench"),
            token: session.token
        )
        let clientData = CollectedClientData(
            type: "webauthn.create",
            challenge: options.publicKey.challenge,
            origin: client.origin
        ).jsonData()
        let authData = AuthenticatorData(
            rpID: "localhost",
            flags: [.userPresent, .userVerified],
            signCount: 0,
            attestedCredential: .init(credentialID: client.credentialID, publicKey: COSEKey(client.key.publicKey))
        )
        let attestation = AttestationObject.makeAttestationObject(
            authenticatorData: authData,
            format: .none,
            clientDataHash: Data(SHA256.hash(data: clientData)),
            sign: { _ in Data() }
        )
        let id = client.credentialID.base64URLEncodedString()
        let _: DeviceResponse = try await call(
            client.http,
            "/api/devices",
            RegistrationRequest(
                deviceName: "bench",
                credential: RegistrationResponseJSON(
                    id: id,
                    rawId: id,
                    response: .init(
                        clientDataJSON: clientData.base64URLEncodedString(),
                        attestationObject: attestation.base64URLEncodedString()
                    )
                )
            ),
            token: session.token
        )
        return client
    }

    static func login(_ client: inout Client) async throws {
        let options: AssertionOptionsResponse = try await call(
            client.http,
            "/api/passkey/options",
            AssertionOptionsRequest(username: client.username)
        )
        client.counter += 1
        let clientData = CollectedClientData(
            type: "webauthn.get",
            challenge: options.publicKey.challenge,
            origin: client.origin
        ).jsonData()
        let authData = AuthenticatorData(
            rpID: "localhost",
            flags: [.userPresent, .userVerified],
            signCount: client.counter
        )
        let signature = try client.key.signature(for: authData.raw + Data(SHA256.hash(data: clientData)))
            .derRepresentation
        let id = client.credentialID.base64URLEncodedString()
        let _: SessionResponse = try await call(
            client.http,
            "/api/passkey/login",
            AssertionRequest(
                credential: AuthenticationResponseJSON(
                    id: id,
                    rawId: id,
                    response: .init(
                        clientDataJSON: clientData.base64URLEncodedString(),
                        authenticatorData: authData.raw.base64URLEncodedString(),
                        signature: signature.base64URLEncodedString()
                    )
                )
            )
        )
    }

    static func call<Body: Encodable, Answer: Decodable>(
        _ http: TestClient,
        _ path: String,
        _ body: Body,
        token: String? = nil
    ) async throws -> Answer {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let token { headers[.authorization] = "Bearer \(token)" }
        let response = try await http.execute(
            .init(path, method: .post, headers: headers, body: ByteBuffer(bytes: try JSONEncoder().encode(body)))
        )
        let data = response.body.map { Data($0.readableBytesView) } ?? Data()
        guard response.status.code / 100 == 2 else {
            throw BenchError("\(path): HTTP \(response.status.code) \(String(decoding: data, as: UTF8.self))")
        }
        return try JSONDecoder().decode(Answer.self, from: data)
    }

    /// This process's user + system time, in seconds.
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(
            usage.ru_utime.tv_usec + usage.ru_stime.tv_usec
        ) / 1e6
    }

    /// The CPU time of each process named `postgres` on the machine (a local database's server
    /// and its backends; none with SQLite), by PID.
    static func databaseCPU() -> [Int32: Double] {
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var found: [Int32: Double] = [:]
        for pid in processes.compactMap(Int32.init) {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                stat.contains("(postgres)")
            else { continue }
            found[pid] = cpuSeconds(pid)
        }
        return found
    }

    /// The database's CPU between two readings: what each process still there spent since the
    /// first (or since it started). Processes that ended meanwhile are missed.
    static func databaseCPUSeconds(since before: [Int32: Double]) -> Double {
        databaseCPU().reduce(0) { $0 + max(0, $1.value - (before[$1.key] ?? 0)) }
    }

    /// utime + stime of a process, in seconds (/proc/PID/stat fields 14 and 15).
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
