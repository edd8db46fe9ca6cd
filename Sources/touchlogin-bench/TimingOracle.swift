import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import TouchLoginAPI
import TouchLoginServer
import WebAuthn

/// What an attacker who knows usernames learns from response times alone: paired, shuffled
/// rounds over loopback HTTP against a live server in this process (SQLite), for each endpoint a
/// name reaches, a name of one kind against a name of another, with a placebo pair (two names of
/// the same kind) beside them.
///
/// Each round sends both requests of a pair in a random order on one kept-alive connection and
/// notes which answered later; the sign test's z over the rounds is ≈ N(0, 1) when the two take
/// the same time (the placebo shows what the machine's noise gives). A pair fails when |z| > `threshold`
/// (4: two-sided p ≈ 6·10⁻⁵, so the 7 pairs of a run pass by chance with p ≈ 4·10⁻⁴ of a false alarm).
///
/// With `--direct` the same pairs call the service in-process, without HTTP: far less noise,
/// so it finds differences no remote attacker could (use it to see where a difference comes from).
///
/// usage: touchlogin-bench timing [ROUNDS] [--direct] [--no-floor]   (exits 1 when a pair shows a difference)
struct TimingOracle {
    static let threshold = 4.0
    let rounds: Int
    var direct = false
    /// Without the options' floor (`ServerConfiguration.optionsFloor`): the work alone.
    var withoutFloor = false

    /// A request the attacker times; what it answers does not matter, only when.
    typealias Probe = @Sendable (any TestClientProtocol) async throws -> Void
    struct Pair {
        let endpoint: String
        let label: String
        let placebo: Bool
        let a: Probe, b: Probe
    }

    func run() async throws -> Bool {
        let directory = NSTemporaryDirectory() + "touchlogin-timing-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try SQLiteLoginStore(path: directory + "/timing.sqlite")
        try await store.migrate()
        var configuration = ServerConfiguration()
        configuration.relyingParty = RelyingParty(id: "localhost", origins: ["http://localhost:8080"])
        configuration.passwordCost = 10
        if withoutFloor { configuration.optionsFloor = 0 }
        // The attacker's budget is not what is measured here: no limit stops the rounds.
        configuration.rateLimits.perAddress = .init(capacity: 1e12, refillPerSecond: 1e9)
        configuration.rateLimits.passwordPerAccount = FailureSchedule(freeFailures: 1 << 40, firstDelay: 0, maxDelay: 0)
        configuration.rateLimits.passwordPerAddressAndAccount = FailureSchedule(
            freeFailures: 1 << 40,
            firstDelay: 0,
            maxDelay: 0
        )
        configuration.rateLimits.passwordPerProof = FailureSchedule(freeFailures: 1 << 40, firstDelay: 0, maxDelay: 0)
        let service = LoginService(store: store, configuration: configuration)
        let app = Application(
            router: LoginHTTPServer.router(service),
            configuration: .init(address: .hostname("127.0.0.1", port: 0))
        )
        return try await app.test(.live) { client in
            let run = UInt32.random(in: 0...UInt32.max)
            let withPasskey = "passkey-\(run)"
            let passwordOnly = "password-\(run)"
            let passkeySession = try await Self.signUp(client, withPasskey)
            try await Self.bindDevice(client, token: passkeySession)
            let passwordSession = try await Self.signUp(client, passwordOnly)
            let otherPasswordSession = try await Self.signUp(client, passwordOnly + "-b")
            let unknown = "nobody-\(run)"
            let otherUnknown = "noone-\(run)"
            let probes = Probes(service: direct ? service : nil)
            let pairs = [
                Pair(
                    endpoint: "POST /api/passkey/options",
                    label: "a name with a passkey vs an unknown name",
                    placebo: false,
                    a: probes.options(withPasskey),
                    b: probes.options(unknown)
                ),
                Pair(
                    endpoint: "POST /api/passkey/options",
                    label: "a name with a passkey vs a name without one",
                    placebo: false,
                    a: probes.options(withPasskey),
                    b: probes.options(passwordOnly)
                ),
                Pair(
                    endpoint: "POST /api/passkey/options",
                    label: "a name without a passkey vs an unknown name",
                    placebo: false,
                    a: probes.options(passwordOnly),
                    b: probes.options(unknown)
                ),
                Pair(
                    endpoint: "POST /api/passkey/options",
                    label: "placebo: two unknown names",
                    placebo: true,
                    a: probes.options(otherUnknown),
                    b: probes.options(unknown)
                ),
                Pair(
                    endpoint: "POST /api/session (wrong password)",
                    label: "a name with a passkey vs an unknown name",
                    placebo: false,
                    a: probes.passwordLogin(withPasskey),
                    b: probes.passwordLogin(unknown)
                ),
                Pair(
                    endpoint: "POST /api/session (wrong password)",
                    label: "a password-only name vs an unknown name",
                    placebo: false,
                    a: probes.passwordLogin(passwordOnly),
                    b: probes.passwordLogin(unknown)
                ),
                Pair(
                    endpoint: "POST /api/session (wrong password)",
                    label: "placebo: two unknown names",
                    placebo: true,
                    a: probes.passwordLogin(otherUnknown),
                    b: probes.passwordLogin(unknown)
                ),
                Pair(
                    endpoint: "POST /api/session/password (step-up, wrong)",
                    label: "a passkey account vs a password-only one",
                    placebo: false,
                    a: probes.stepUp(passkeySession),
                    b: probes.stepUp(passwordSession)
                ),
                Pair(
                    endpoint: "POST /api/session/password (step-up, wrong)",
                    label: "placebo: two password-only accounts",
                    placebo: true,
                    a: probes.stepUp(otherPasswordSession),
                    b: probes.stepUp(passwordSession)
                ),
            ]
            // Warm-up: the first requests of each kind fill caches both names then share.
            for pair in pairs {
                for _ in 0..<20 {
                    try await pair.a(client)
                    try await pair.b(client)
                }
            }
            var later = [Int](repeating: 0, count: pairs.count)
            var medians = [[Double]](repeating: [], count: pairs.count)
            var times = [[Double]](repeating: [], count: pairs.count)
            var order = Array(repeating: Array(pairs.indices), count: rounds).flatMap { $0 }
            order.shuffle()
            for index in order {
                let pair = pairs[index]
                let aFirst = Bool.random()
                let first = try await Self.time(client, aFirst ? pair.a : pair.b)
                let second = try await Self.time(client, aFirst ? pair.b : pair.a)
                let (a, b) = aFirst ? (first, second) : (second, first)
                if a > b { later[index] += 1 }
                medians[index].append(a - b)
                times[index].append(a)
            }
            var passed = true
            print(
                String(
                    format: "%d paired rounds per pair, shuffled, %@; |z| > %.0f fails",
                    rounds,
                    (direct ? "calling the service in-process" : "over loopback HTTP")
                        + (withoutFloor ? ", without the options' floor" : "") as NSString,
                    Self.threshold
                )
            )
            for (index, pair) in pairs.enumerated() {
                let n = Double(rounds)
                let z = (Double(later[index]) - n / 2) / (n / 4).squareRoot()
                let differences = medians[index].sorted()
                let fails = !pair.placebo && abs(z) > Self.threshold
                if fails { passed = false }
                let columns =
                    pair.endpoint.padding(toLength: 44, withPad: " ", startingAt: 0) + " "
                    + pair.label.padding(toLength: 46, withPad: " ", startingAt: 0)
                let typical = times[index].sorted()[rounds / 2]
                print(
                    columns
                        + String(
                            format: " z = %+5.1f  median a−b %+6.1f µs (a: %.0f µs)",
                            z,
                            differences[differences.count / 2] * 1e6,
                            typical * 1e6
                        )
                        + (fails ? "  DIFFERS" : "")
                )
            }
            return passed
        }
    }

    static func time(_ client: any TestClientProtocol, _ probe: Probe) async throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try await probe(client)
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// The requests timed: over HTTP, or straight into `service` when it is given.
    struct Probes {
        let service: LoginService?

        func options(_ username: String) -> Probe {
            if let service {
                return { _ in
                    _ = try await service.assertionOptions(
                        AssertionOptionsRequest(username: username),
                        address: "127.0.0.1"
                    )
                }
            }
            let body = try! JSONEncoder().encode(AssertionOptionsRequest(username: username))
            return { client in try await send(client, "/api/passkey/options", body, expecting: 200) }
        }

        func passwordLogin(_ username: String) -> Probe {
            if let service {
                return { _ in
                    _ = try? await service.passwordLogin(
                        PasswordLoginRequest(username: username, password: "a wrong guess"),
                        address: "127.0.0.1"
                    )
                }
            }
            let body = try! JSONEncoder().encode(PasswordLoginRequest(username: username, password: "a wrong guess"))
            return { client in try await send(client, "/api/session", body, expecting: 401) }
        }

        func stepUp(_ token: String) -> Probe {
            if let service {
                return { _ in
                    let (session, account) = try await service.authenticate(bearer: token)
                    _ = try? await service.confirmPassword(
                        session: session,
                        account: account,
                        PasswordConfirmationRequest(password: "a wrong guess"),
                        address: "127.0.0.1"
                    )
                }
            }
            let body = try! JSONEncoder().encode(PasswordConfirmationRequest(password: "a wrong guess"))
            return { client in try await send(client, "/api/session/password", body, token: token, expecting: 401) }
        }
    }

    static func send(
        _ client: any TestClientProtocol,
        _ path: String,
        _ body: Data,
        token: String? = nil,
        expecting status: Int
    ) async throws {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let token { headers[.authorization] = "Bearer \(token)" }
        let response = try await client.execute(
            uri: path,
            method: .post,
            headers: headers,
            body: ByteBuffer(bytes: body)
        ) { $0 }
        guard response.status.code == status else {
            throw BenchError(
                "\(path): HTTP \(response.status.code), expected \(status): \(String(buffer: response.body))"
            )
        }
    }

    static func signUp(_ client: any TestClientProtocol, _ username: String) async throws -> String {
        let body = try JSONEncoder().encode(CreateAccountRequest(username: username, password: "correct horse battery"))
        let response = try await client.execute(
            uri: "/api/accounts",
            method: .post,
            headers: [.contentType: "application/json"],
            body: ByteBuffer(bytes: body)
        ) { $0 }
        guard response.status.code / 100 == 2 else { throw BenchError("sign-up: HTTP \(response.status.code)") }
        return try JSONDecoder().decode(SessionResponse.self, from: Data(response.body.readableBytesView)).token
    }

    /// A device key bound to the session's account, as `touchlogin` binds one.
    static func bindDevice(_ client: any TestClientProtocol, token: String) async throws {
        let headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(token)"]
        let optionsBody = try JSONEncoder().encode(RegistrationOptionsRequest(deviceName: "timing"))
        let options = try await client.execute(
            uri: "/api/devices/options",
            method: .post,
            headers: headers,
            body: ByteBuffer(bytes: optionsBody)
        ) { $0 }
        let challenge = try JSONDecoder().decode(
            RegistrationOptionsResponse.self,
            from: Data(options.body.readableBytesView)
        ).publicKey.challenge
        let key = P256.Signing.PrivateKey()
        let credentialID = Data((0..<CredentialKind.deviceKeyIDBytes).map { _ in UInt8.random(in: 0...255) })
        let clientData = CollectedClientData(
            type: "webauthn.create",
            challenge: challenge,
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
        let request = RegistrationRequest(
            deviceName: "timing",
            credential: RegistrationResponseJSON(
                id: id,
                rawId: id,
                response: .init(
                    clientDataJSON: clientData.base64URLEncodedString(),
                    attestationObject: attestation.base64URLEncodedString(),
                    transports: CredentialKind.deviceKeyTransports
                )
            )
        )
        let registered = try await client.execute(
            uri: "/api/devices",
            method: .post,
            headers: headers,
            body: ByteBuffer(bytes: try JSONEncoder().encode(request))
        ) { $0 }
        guard registered.status.code / 100 == 2 else {
            throw BenchError("binding a device: HTTP \(registered.status.code) \(String(buffer: registered.body))")
        }
    }
}
