import EnclaveClient
import Foundation
import IntegrationSupport
import LocalAuthenticationTesting
import XCTest

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A real touchlogin-server process on a free loopback port with its own SQLite file.
final class LoginServerProcess {
    let directory: String
    let port: Int
    let pid: pid_t
    var baseURL: String { "http://localhost:\(port)" }

    /// SQLite in its own directory by default; `postgres`: a database URL several instances may share.
    init(_ extraArguments: [String] = [], postgres: String? = nil) throws {
        var template = Array("/tmp/la-login-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        port = Self.freePort()
        let storage = postgres.map { ["--postgres", $0] } ?? ["--database", directory + "/server.sqlite"]
        pid = try DaemonLauncher.spawn(
            productPath("touchlogin-server"),
            [
                "--port", String(port), "--password-cost", "10", "--log-level", "warning",
            ] + storage + extraArguments
        )
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let (status, _, _) = try? http("GET", "/health"), status == 200 { return }
            usleep(50_000)
        }
        terminateAndWait(pid)
        throw XCTSkip("touchlogin-server did not answer /health within 20 s")
    }

    deinit {
        terminateAndWait(pid)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// One HTTP request; returns status, JSON body (if any) and headers.
    func http(
        _ method: String,
        _ path: String,
        json: Any? = nil,
        body: Data? = nil,
        token: String? = nil
    ) throws -> (Int, Any?, [AnyHashable: Any]) {
        var request = URLRequest(url: URL(string: baseURL + path)!)
        request.httpMethod = method
        request.timeoutInterval = 20
        if let json {
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
        } else if let body {
            request.httpBody = body
        }
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let done = DispatchSemaphore(value: 0)
        let box = HTTPBox()
        URLSession.shared.dataTask(with: request) { data, response, error in
            box.data = data
            box.response = response as? HTTPURLResponse
            box.error = error
            done.signal()
        }.resume()
        guard done.wait(timeout: .now() + 30) == .success else { throw NSError(domain: "http", code: 1) }
        if let error = box.error { throw error }
        let object = box.data.flatMap { $0.isEmpty ? nil : try? JSONSerialization.jsonObject(with: $0) }
        return (box.response?.statusCode ?? 0, object, box.response?.allHeaderFields ?? [:])
    }

    /// An error answer's stable code.
    static func code(_ body: Any?) -> String? {
        ((body as? [String: Any])?["error"] as? [String: Any])?["code"] as? String
    }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

private final class HTTPBox: @unchecked Sendable {
    var data: Data?
    var response: HTTPURLResponse?
    var error: (any Error)?
}

/// The touchlogin client, run as a separate process against one daemon and one server, with its
/// own state directory (one "device").
struct LoginClient {
    let enclave: TestEnclave
    let server: LoginServerProcess
    let stateDirectory: String

    init(enclave: TestEnclave, server: LoginServerProcess) {
        self.enclave = enclave
        self.server = server
        stateDirectory = enclave.directory + "/touchlogin"
    }

    @discardableResult
    func run(
        _ arguments: [String],
        input: String = "",
        file: StaticString = #filePath,
        line: UInt = #line
    ) throws -> ProcessOutput {
        var environment = ProcessInfo.processInfo.environment
        environment["LAENCLAVED_SOCKET"] = enclave.socketPath
        environment["TOUCHLOGIN_SERVER"] = server.baseURL
        environment["TOUCHLOGIN_STATE_DIR"] = stateDirectory
        return try runProcess(
            productPath("touchlogin"),
            arguments,
            input: input,
            environment: environment,
            timeout: 60,
            file: file,
            line: line
        )
    }

    /// The client's saved state (session token, binding).
    func state() throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: stateDirectory + "/state.json")))
            as! [String: Any]
    }

    var token: String? { (try? state()).flatMap { ($0["session"] as? [String: Any])?["token"] as? String } }

    /// Sign up, then log in with the password and enable fingerprint login (one queued match).
    func signUpAndEnable(
        username: String = "alice",
        password: String = "correct horse",
        file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        let signup = try run(["signup", "--username", username], input: password + "\n")
        XCTAssertEqual(signup.status, 0, signup.stdout + signup.stderr, file: file, line: line)
        try enclave.queue(.match)
        let first = try run([], input: password + "\ny\n")
        XCTAssertEqual(first.status, 0, first.stdout + first.stderr, file: file, line: line)
        XCTAssertTrue(
            first.stdout.contains("Fingerprint login is enabled"),
            first.stdout + first.stderr,
            file: file,
            line: line
        )
    }
}

/// A throw-away database on the PostgreSQL that scripts/test starts ($TOUCHLOGIN_TEST_POSTGRES is
/// its admin URL); dropped afterwards.
final class PostgresTestDatabase {
    let url: String
    private let admin: String
    private let name: String

    init() throws {
        guard let admin = ProcessInfo.processInfo.environment["TOUCHLOGIN_TEST_POSTGRES"], !admin.isEmpty else {
            throw XCTSkip("no PostgreSQL: run through scripts/test, which starts one and sets TOUCHLOGIN_TEST_POSTGRES")
        }
        // A URL with anything around it would make psql take it for a database name on the local
        // socket: say what is wrong instead.
        guard admin.hasPrefix("postgres://"), !admin.contains(where: \.isNewline) else {
            throw NSError(
                domain: "psql",
                code: 1,
                userInfo: [
                    NSLocalizedDescriptionKey:
                        "TOUCHLOGIN_TEST_POSTGRES is not one postgres:// URL: \(admin.debugDescription)"
                ]
            )
        }
        self.admin = admin
        name = "touchlogin_\(UInt32.random(in: 0...UInt32.max))"
        let made = try runProcess("/usr/bin/psql", [admin, "-qAtc", "CREATE DATABASE \(name)"])
        guard made.status == 0 else {
            throw NSError(domain: "psql", code: Int(made.status), userInfo: [NSLocalizedDescriptionKey: made.stderr])
        }
        url = admin.replacingOccurrences(of: "/postgres", with: "/\(name)")
    }

    deinit { _ = try? runProcess("/usr/bin/psql", [admin, "-qAtc", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"]) }

    func scalar(_ sql: String) throws -> String {
        try runProcess("/usr/bin/psql", [url, "-qAtc", sql]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
