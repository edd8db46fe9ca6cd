// MSG_NOSIGNAL: some compile jobs find glibc's socket constants only through CPeerSocket (which
// includes sys/socket.h and exports it), not through Glibc (seen 2026-11-30).
import CPeerSocket
import EnclaveClient
import EnclaveProtocol
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// One prompt per user; a vanished client releases the prompt at once.
final class PromptTests: XCTestCase {
    func testASecondEvaluationWaitsForTheFirstPrompt() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            async let first = evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            try eventually("the first prompt to open") { try enclave.status().promptOpen }
            async let second = evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            try await Task.sleep(nanoseconds: 200_000_000)
            // One touch ends the first prompt; the second then opens and takes the next touch.
            try enclave.queue(.match)
            let a = await first
            XCTAssertNil(a)
            try enclave.queue(.cancel)
            let b = await second
            XCTAssertEqual(b, .userCancel)
        }
    }

    func testAWaitingEvaluationGivesUpWithSystemCancel() async throws {
        let enclave = try TestEnclave(.with { $0.promptQueueTimeout = 0.5 })
        try await enclave.run {
            let holder = LAContext()
            async let first = evaluate(holder, .deviceOwnerAuthenticationWithBiometrics)
            try eventually("the first prompt to open") { try enclave.status().promptOpen }
            let second = await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertEqual(second, .systemCancel)
            holder.invalidate()
            _ = await first
        }
    }

    func testAClientKilledMidPromptReleasesThePrompt() async throws {
        let enclave = try TestEnclave()
        let lactl = Process()
        lactl.executableURL = URL(fileURLWithPath: productPath("lactl"))
        lactl.arguments = [
            "authenticate", "--socket", enclave.socketPath, "--policy", "biometrics", "--reason", "Held open",
        ]
        lactl.environment = ["LA_PROMPT": "headless", "PATH": "/usr/bin:/bin"]
        lactl.standardInput = FileHandle.nullDevice
        lactl.standardOutput = FileHandle.nullDevice
        lactl.standardError = FileHandle.nullDevice
        try lactl.run()
        try eventually("lactl's prompt to open") { try lactlSeesItsPromptOpen(enclave) }
        XCTAssertFalse(try enclave.status().promptOpen, "another app is not told of lactl's prompt")
        kill(lactl.processIdentifier, SIGKILL)
        lactl.waitUntilExit()
        try eventually("the prompt to be released", timeout: 5) { try !lactlSeesItsPromptOpen(enclave) }
        try enclave.queue(.match)
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertNil(code, "the next app gets the sensor and the queued touch")
        guard
            case .audit(let entries) = try enclave.administer(
                .audit(.init(limit: 5, everyApp: true)),
                secrets: ["1234"]
            )
        else { return XCTFail() }
        XCTAssertTrue(entries.contains { $0.app.hasSuffix("/lactl") && $0.result.hasPrefix("appCancel") }, "\(entries)")
    }

    func testInvalidatingAContextThatWaitsForThePromptAnswersAppCancelAtOnce() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            let holder = LAContext()
            async let first = evaluate(holder, .deviceOwnerAuthenticationWithBiometrics)
            try eventually("the first prompt to open") { try enclave.status().promptOpen }
            let waiting = LAContext()
            async let second = evaluate(waiting, .deviceOwnerAuthenticationWithBiometrics)
            try await Task.sleep(nanoseconds: 200_000_000)
            let start = Date()
            waiting.invalidate()
            let code = await second
            XCTAssertEqual(code, .appCancel)
            XCTAssertLessThan(Date().timeIntervalSince(start), 5, "not after the 30 s queue timeout")
            holder.invalidate()
            _ = await first
        }
    }

    func testAClientThatNeverReadsCannotHoldThePrompt() async throws {
        let enclave = try TestEnclave()
        let fd = try EnclaveConnection.connectSocket(enclave.socketPath)
        defer { close(fd) }
        func send(_ id: UInt64, _ request: Request) {
            let frame = FrameEncoder.frame(RequestEnvelope(id: id, request: request).encoded())
            _ = frame.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        send(1, .hello(.init(version: 1)))
        send(2, .evaluate(.init(context: "hog", policy: 1, options: .init(reason: "never read"))))
        try eventually("the hog's prompt to open") { try enclave.status().promptOpen }
        // Flood requests and never read a reply: the daemon must not block on this socket.
        var flags = fcntl(fd, F_GETFL)
        flags |= O_NONBLOCK
        _ = fcntl(fd, F_SETFL, flags)
        for i in 0..<20_000 { send(UInt64(3 + i), .status) }
        try eventually("the daemon to drop the hog and release the prompt", timeout: 20) {
            try !enclave.status().promptOpen
        }
        try enclave.queue(.match)
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertNil(code)
    }

    func testAnAppSeesOnlyItsOwnAuditEntriesWithoutThePasscode() throws {
        let enclave = try TestEnclave()
        let lactl = productPath("lactl")
        try enclave.queue(.match)
        XCTAssertEqual(
            try runProcess(lactl, ["authenticate", "--socket", enclave.socketPath, "--reason", "x"]).status,
            0
        )
        guard case .audit(let mine) = try enclave.send(.audit(.init(limit: 50, everyApp: false))) else {
            return XCTFail()
        }
        XCTAssertFalse(mine.contains { $0.app.hasSuffix("/lactl") }, "another app's entries need the passcode")
        guard case .audit(let all) = try enclave.administer(.audit(.init(limit: 50, everyApp: true)), secrets: ["1234"])
        else { return XCTFail() }
        XCTAssertTrue(all.contains { $0.app.hasSuffix("/lactl") && $0.operation == "evaluate" })
        XCTAssertThrowsError(try enclave.administer(.audit(.init(limit: 50, everyApp: true)), secrets: ["0000"]))
    }

    func testPasscodeTypedWhileTheSensorIsArmed() async throws {
        let enclave = try TestEnclave()
        // No touch at all: the typed passcode is taken while the sensor waits.
        try enclave.queue(.passcode("1234"))
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthentication) }
        XCTAssertNil(code)
    }

    func testPasscodeIsNotAcceptedByTheBiometricPolicy() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(.passcode("1234"), .cancel)
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertEqual(code, .userCancel)
    }

    /// `promptOpen` as lactl (the app whose prompt it is) reads it.
    private func lactlSeesItsPromptOpen(_ enclave: TestEnclave) throws -> Bool {
        let status = try runProcess(productPath("lactl"), ["status", "--json", "--socket", enclave.socketPath])
        let json = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        return json?["promptOpen"] as? Bool ?? false
    }
}
