import EnclaveProtocol
import Foundation
import XCTest

@testable import EnclaveClient

/// Which daemon a process talks to: the override, the variables, the system socket, the user's.
final class EnclaveEndpointTests: XCTestCase {
    func testTheEnvironmentChoosesTheDaemon() {
        let named = EnclaveEndpoint.resolve(environment: [
            "LAENCLAVED_SOCKET": "/tmp/x/socket", "LA_PROMPT": "headless",
        ])
        XCTAssertEqual(named, EnclaveEndpoint(socketPath: "/tmp/x/socket", autostart: false, headless: true))
        let user = EnclaveEndpoint.resolve(environment: ["XDG_RUNTIME_DIR": "/run/user/4242", "LAENCLAVED_SOCKET": ""])
        if FileManager.default.fileExists(atPath: EnclavePaths.systemSocket) {
            XCTAssertEqual(
                user,
                EnclaveEndpoint(socketPath: EnclavePaths.systemSocket, autostart: false, headless: false),
                "the system daemon first"
            )
        } else {
            XCTAssertEqual(
                user,
                EnclaveEndpoint(socketPath: "/run/user/4242/laenclaved/socket", autostart: true, headless: false)
            )
        }
        let override = EnclaveEndpoint(socketPath: "/tmp/override", autostart: false, headless: true)
        EnclaveEndpoint.$override.withValue(override) {
            XCTAssertEqual(
                EnclaveEndpoint.resolve(environment: ["LAENCLAVED_SOCKET": "/tmp/x/socket"]),
                override,
                "a task's override wins"
            )
            XCTAssertEqual(EnclaveEndpoint.resolve(), override)
        }
    }

    /// The process's variables are read at each resolution (a variable set after start counts),
    /// and give what the same variables given as a dictionary give.
    func testTheProcessVariablesAreReadAsTheyAreNow() {
        let saved = (
            getenv("LAENCLAVED_SOCKET").map { String(cString: $0) }, getenv("LA_PROMPT").map { String(cString: $0) }
        )
        defer {
            if let s = saved.0 { setenv("LAENCLAVED_SOCKET", s, 1) } else { unsetenv("LAENCLAVED_SOCKET") }
            if let s = saved.1 { setenv("LA_PROMPT", s, 1) } else { unsetenv("LA_PROMPT") }
        }
        setenv("LAENCLAVED_SOCKET", "/tmp/first/socket", 1)
        unsetenv("LA_PROMPT")
        XCTAssertEqual(
            EnclaveEndpoint.resolve(),
            EnclaveEndpoint(socketPath: "/tmp/first/socket", autostart: false, headless: false)
        )
        setenv("LAENCLAVED_SOCKET", "/tmp/second/socket", 1)
        setenv("LA_PROMPT", "headless", 1)
        XCTAssertEqual(
            EnclaveEndpoint.resolve(),
            EnclaveEndpoint(socketPath: "/tmp/second/socket", autostart: false, headless: true)
        )
        XCTAssertEqual(
            EnclaveEndpoint.resolve(),
            EnclaveEndpoint.resolve(environment: ProcessInfo.processInfo.environment)
        )
        unsetenv("LAENCLAVED_SOCKET")
        XCTAssertEqual(
            EnclaveEndpoint.resolve(),
            EnclaveEndpoint.resolve(environment: ProcessInfo.processInfo.environment)
        )
    }
}
