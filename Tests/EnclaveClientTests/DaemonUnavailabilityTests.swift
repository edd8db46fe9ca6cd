import EnclaveProtocol
import Foundation
import Synchronization
import XCTest

@testable import EnclaveClient

#if canImport(Glibc)
import Glibc
#endif

/// A process with no daemon to talk to learns why, once: what was looked for, why it failed or
/// was refused, and the command that fixes it — in the error of every call, and as one line on
/// standard error the first time.
final class DaemonUnavailabilityTests: XCTestCase {
    private let said = Said()
    private var previousWriter: (@Sendable (String) -> Void)?

    override func setUp() {
        super.setUp()
        DaemonDiagnostics.reset()
        let said = self.said
        previousWriter = DaemonDiagnostics.setWriter { said.append($0) }
    }

    override func tearDown() {
        if let previousWriter { DaemonDiagnostics.setWriter(previousWriter) }
        DaemonDiagnostics.reset()
        super.tearDown()
    }

    private func unavailability(_ endpoint: EnclaveEndpoint) -> DaemonUnavailability? {
        do {
            _ = try EnclaveConnections.shared(for: endpoint)
            XCTFail("a daemon answered at \(endpoint.socketPath)")
            return nil
        } catch EnclaveClientError.unavailable(let problem) {
            return problem
        } catch {
            XCTFail("\(error)")
            return nil
        }
    }

    func testNothingListeningSaysWhereWhyAndTheFixOnceAndInEveryError() throws {
        let path = NSTemporaryDirectory() + "no-daemon-\(getpid())/socket"
        let endpoint = EnclaveEndpoint(socketPath: path, autostart: false, headless: true)
        let first = try XCTUnwrap(unavailability(endpoint))
        XCTAssertEqual(first.sought, "the socket \(path)")
        XCTAssertTrue(first.reason.hasPrefix("nothing answers there ("), first.reason)
        XCTAssertEqual(first.fix, "start a daemon there: laenclaved --user --socket \(path) &")
        let second = try XCTUnwrap(unavailability(endpoint))
        XCTAssertEqual(second, first)
        XCTAssertEqual(said.lines, ["[LocalAuthentication] " + first.description], "said once, not per call")
        XCTAssertEqual(DaemonDiagnostics.lastUnavailability, first)
        XCTAssertEqual("\(EnclaveClientError.unavailable(first))", first.description)
        XCTAssertTrue(first.description.contains(": nothing answers there ("), first.description)
        XCTAssertTrue(first.description.contains(". Fix: start a daemon there"), first.description)
    }

    func testASocketNamedByTheEnvironmentSaysSoAndHowToStopUsingIt() throws {
        let path = NSTemporaryDirectory() + "no-daemon-env-\(getpid())/socket"
        let saved = getenv(EnclavePaths.socketEnvironmentKey).map { String(cString: $0) }
        setenv(EnclavePaths.socketEnvironmentKey, path, 1)
        defer {
            if let saved {
                setenv(EnclavePaths.socketEnvironmentKey, saved, 1)
            } else {
                unsetenv(EnclavePaths.socketEnvironmentKey)
            }
        }
        let problem = try XCTUnwrap(unavailability(.resolve()))
        XCTAssertEqual(problem.sought, "\(path) (named by $LAENCLAVED_SOCKET)")
        XCTAssertTrue(problem.fix.contains("unset LAENCLAVED_SOCKET"), problem.fix)
    }

    /// A daemon that refuses a client says why in a reply to no request, then hangs up: the
    /// client carries that reason, not "the connection was lost".
    func testADaemonThatRefusesThisProcessIsQuoted() throws {
        let refusing = try RefusingDaemon(reason: Failure(.notPermitted, "this user-mode daemon serves uid 4242 only"))
        XCTAssertThrowsError(try EnclaveConnection(socketPath: refusing.path)) { error in
            XCTAssertEqual(
                error as? EnclaveClientError,
                .failure(Failure(.notPermitted, "this user-mode daemon serves uid 4242 only"))
            )
        }
        let problem = try XCTUnwrap(
            unavailability(EnclaveEndpoint(socketPath: refusing.path, autostart: false, headless: true))
        )
        XCTAssertEqual(problem.reason, "the daemon refused this process: this user-mode daemon serves uid 4242 only")
        XCTAssertTrue(problem.fix.hasPrefix("lactl doctor"), problem.fix)
        XCTAssertEqual(said.lines.count, 1)
    }

    /// Attack: whatever listens at the socket writes the refusal's text, and it reached the app's
    /// standard error as it was — a newline to forge lines, terminal escapes to rewrite the screen.
    /// The line said is one line, with no control character.
    func testARefusalsTextCannotForgeLinesOrDriveTheTerminal() throws {
        let refusing = try RefusingDaemon(
            reason: Failure(.notPermitted, "no\n[LocalAuthentication] all is well\u{1B}[2J\u{1B}]0;owned\u{07}")
        )
        _ = unavailability(EnclaveEndpoint(socketPath: refusing.path, autostart: false, headless: true))
        XCTAssertEqual(said.lines.count, 1)
        let line = try XCTUnwrap(said.lines.first)
        XCTAssertFalse(line.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, line)
        XCTAssertTrue(line.hasPrefix("[LocalAuthentication] no laenclaved for this process: "), line)
    }

    func testAnOlderDaemonIsToldApartFromARefusal() {
        let endpoint = EnclaveEndpoint(socketPath: "/tmp/x/socket", autostart: false, headless: true)
        let problem = DaemonUnavailability.refused(
            endpoint,
            .failure(Failure(.unsupportedVersion, "this daemon speaks protocol version 9, not 10"))
        )
        XCTAssertTrue(problem.fix.contains("same release"), problem.fix)
        let impostor = DaemonUnavailability.refused(endpoint, .untrustedDaemon(path: "/tmp/x/socket", uid: 65534))
        XCTAssertTrue(impostor.reason.contains("uid 65534"), impostor.reason)
        XCTAssertTrue(impostor.fix.contains("remove /tmp/x/socket"), impostor.fix)
    }

    /// When no daemon may be started, the reason names where it looked and the commands that fix it.
    func testNoDaemonToStartNamesTheInstallAndTheDevelopmentBuild() {
        let none = DaemonLauncher.notStarted(
            .nothing,
            sought: "the user daemon's socket /run/user/1000/laenclaved/socket (started on demand)"
        )
        XCTAssertTrue(none.reason.contains("$LAENCLAVED_PATH"), none.reason)
        for place in DaemonLauncher.installedLocations { XCTAssertTrue(none.reason.contains(place), none.reason) }
        XCTAssertTrue(none.fix.contains("sudo bash scripts/install"), none.fix)
        XCTAssertTrue(none.fix.contains("swift build && .build/debug/laenclaved --user &"), none.fix)
        let refused = DaemonLauncher.notStarted(.notInstalled(["/home/me/la/.build/debug/laenclaved"]), sought: "s")
        XCTAssertTrue(refused.reason.contains("not an installed program"), refused.reason)
        XCTAssertTrue(
            refused.fix.hasPrefix("start it yourself: /home/me/la/.build/debug/laenclaved --user &"),
            refused.fix
        )
    }

    /// A program where an app's environment points, outside root's directories, is found but not
    /// taken; said as such.
    func testAProgramOutsideRootsDirectoriesIsNotInstalled() throws {
        let path = NSTemporaryDirectory() + "fake-laenclaved-\(getpid())"
        FileManager.default.createFile(
            atPath: path,
            contents: Data("#!/bin/sh\n".utf8),
            attributes: [.posixPermissions: 0o755]
        )
        defer { try? FileManager.default.removeItem(atPath: path) }
        switch DaemonLauncher.locate([EnclavePaths.daemonEnvironmentKey: path]) {
        case .notInstalled(let refused): XCTAssertEqual(refused.first, path)
        case .installed(let found): XCTAssertNotEqual(found, path, "a program in /tmp is never an installed one")
        case .nothing: XCTFail("the program was not even found")
        }
    }
}

private final class Said: Sendable {
    private let said = Mutex<[String]>([])
    func append(_ line: String) { said.withLock { $0.append(line) } }
    var lines: [String] { said.withLock { $0 } }
}

/// Accepts one connection, answers its first bytes with a refusal in a reply to no request (id
/// 0), as laenclaved does, and hangs up.
private final class RefusingDaemon: Sendable {
    let path: String
    private let listener: Int32

    init(reason: Failure) throws {
        path = NSTemporaryDirectory() + "refusing-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = self.path
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard listener >= 0, bound == 0, listen(listener, 4) == 0 else { throw POSIXError(.EADDRINUSE) }
        let refusal = FrameEncoder.frame(ReplyEnvelope(id: 0, reply: .failure(reason)).encoded())
        Thread {
            while true {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                _ = refusal.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(fd)
            }
        }.start()
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        unlink(path)
    }
}
