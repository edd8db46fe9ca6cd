import EnclaveClient
import EnclaveProtocol
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// What the prompt shows (behavior.md §6), read from the screens the daemon sends.
final class PromptScreenTests: XCTestCase {
    private final class Screens: @unchecked Sendable {
        private let lock = NSLock()
        private var all: [PromptScreen] = []
        func add(_ s: PromptScreen) { lock.withLock { all.append(s) } }
        var value: [PromptScreen] { lock.withLock { all } }
    }

    private func screens(
        _ enclave: TestEnclave,
        policy: LAPolicy,
        options: EvaluationOptions,
        script: [TestEnclave.Event]
    ) async throws -> ([PromptScreen], EvaluationResult?) {
        let connection = try EnclaveConnection(socketPath: enclave.socketPath)
        defer { connection.close() }
        let seen = Screens()
        try enclave.queue(script)
        let reply = try await connection.request(
            .evaluate(.init(context: "screens", policy: policy.rawValue, options: options))
        ) { r in
            if case .prompt(let s) = r { seen.add(s) }
        }
        guard case .evaluated(let result) = reply else { return (seen.value, nil) }
        return (seen.value, result)
    }

    func testThePromptShowsAppReasonInstructionTitlesAndTheFallbackOnlyAfterAFailure() async throws {
        let enclave = try TestEnclave()
        let options = EvaluationOptions(reason: "Pay 12 €", cancelTitle: "Not now", fallbackTitle: "Use Password")
        let (shown, result) = try await screens(
            enclave,
            policy: .deviceOwnerAuthenticationWithBiometrics,
            options: options,
            script: [.nomatch, .cancel]
        )
        XCTAssertEqual(result?.error, .userCancel)
        XCTAssertEqual(shown.count, 2)
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        XCTAssertEqual(shown[0].app, me, "the app identity comes from the kernel")
        XCTAssertEqual(shown[0].reason, "Pay 12 €")
        XCTAssertEqual(shown[0].cancelTitle, "Not now")
        XCTAssertNil(shown[0].fallbackTitle, "no fallback before the first failure")
        XCTAssertTrue(shown[0].instruction.contains("Touch ID"))
        XCTAssertTrue(shown[0].sensorArmed)
        XCTAssertTrue(shown[0].sensorSimulated)
        XCTAssertFalse(shown[0].passcodeEntry, "the biometric policy takes no passcode")
        XCTAssertEqual(shown[1].fallbackTitle, "Use Password")
        XCTAssertTrue(shown[1].instruction.contains("Try Again"))
    }

    func testDefaultTitlesAndPasscodeEntryForTheOwnerPolicy() async throws {
        let enclave = try TestEnclave()
        let (shown, result) = try await screens(
            enclave,
            policy: .deviceOwnerAuthentication,
            options: EvaluationOptions(reason: "Sign in"),
            script: [.nomatch, .cancel]
        )
        XCTAssertEqual(result?.error, .userCancel)
        XCTAssertEqual(shown.first?.cancelTitle, "Cancel")
        XCTAssertEqual(shown.first?.passcodeEntry, true, "the passcode can be typed while the sensor is armed")
        XCTAssertEqual(shown.last?.fallbackTitle, "Enter Password")
    }

    func testADelayShowsTheTimeLeft() async throws {
        let enclave = try TestEnclave(.with { $0.enrolled = [] })
        let wrong: [TestEnclave.Event] = (1...5).map { .passcode("000\($0)") } + [.passcode("1234"), .cancel]
        let (shown, _) = try await screens(
            enclave,
            policy: .deviceOwnerAuthentication,
            options: EvaluationOptions(reason: "Sign in"),
            script: wrong
        )
        let delayed = try XCTUnwrap(shown.last { $0.passcodeRetryAfter != nil })
        XCTAssertEqual(delayed.passcodeRetryAfter ?? 0, 60, accuracy: 5)
        XCTAssertTrue(delayed.instruction.contains("Try again in"), delayed.instruction)
        XCTAssertEqual(
            try enclave.status().passcodeFailures,
            5,
            "the right passcode during the delay was not even checked"
        )
    }
}
