import EnclaveClient
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

/// Every LAError code an evaluation can produce on Linux, through the real daemon.
final class ErrorCodeTests: XCTestCase {
    func testPreflightOrderForTheBiometricPolicy() async throws {
        let noSensor = try TestEnclave(
            .with {
                $0.sensor = .none
                $0.enrolled = []
            }
        )
        noSensor.run {
            let c = LAContext()
            XCTAssertEqual(canEvaluate(c, .deviceOwnerAuthenticationWithBiometrics), .biometryNotAvailable)
            XCTAssertEqual(c.biometryType, .none, "biometryType is set even when the check fails")
            XCTAssertNil(canEvaluate(c, .deviceOwnerAuthentication), "the passcode alone satisfies the owner policy")
        }
        let noPasscode = try TestEnclave(.with { $0.passcode = nil })
        noPasscode.run {
            let c = LAContext()
            XCTAssertEqual(canEvaluate(c, .deviceOwnerAuthenticationWithBiometrics), .passcodeNotSet)
            XCTAssertEqual(c.biometryType, .touchID)
            XCTAssertEqual(canEvaluate(c, .deviceOwnerAuthentication), .passcodeNotSet)
        }
        let notEnrolled = try TestEnclave(.with { $0.enrolled = [] })
        notEnrolled.run {
            XCTAssertEqual(canEvaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics), .biometryNotEnrolled)
        }
        let faces = try TestEnclave(.with { $0.sensor = .faceID })
        faces.run {
            let c = LAContext()
            XCTAssertNil(canEvaluate(c, .deviceOwnerAuthenticationWithBiometrics))
            XCTAssertEqual(c.biometryType, .faceID)
        }
    }

    func testEvaluateReportsThePreflightErrorToo() async throws {
        let noPasscode = try TestEnclave(.with { $0.passcode = nil })
        await noPasscode.run {
            let code = await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertEqual(code, .passcodeNotSet)
        }
    }

    func testCompanionPoliciesAreNotAvailable() async throws {
        let enclave = try TestEnclave()
        await enclave.run {
            for policy in [
                LAPolicy.deviceOwnerAuthenticationWithCompanion, .deviceOwnerAuthenticationWithBiometricsOrCompanion,
            ] {
                XCTAssertEqual(canEvaluate(LAContext(), policy), .companionNotAvailable)
                let code = await evaluate(LAContext(), policy)
                XCTAssertEqual(code, .companionNotAvailable)
            }
        }
    }

    func testThreeTouchIDFailuresEndTheBiometricPolicyWithAuthenticationFailed() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(.nomatch, .nomatch, .nomatch)
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertEqual(code, .authenticationFailed)
        XCTAssertEqual(try enclave.status().biometricFailures, 3)
    }

    func testFallbackAfterAFailureEndsTheBiometricPolicyWithUserFallback() async throws {
        let enclave = try TestEnclave()
        // A fallback before any failure hits a hidden button and is discarded.
        try enclave.queue(.fallback, .nomatch, .fallback)
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertEqual(code, .userFallback)
    }

    func testAnEmptyFallbackTitleHidesTheFallbackButton() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(.nomatch, .fallback, .cancel)
        let code = await enclave.run { () async -> LAError.Code? in
            let c = LAContext()
            c.localizedFallbackTitle = ""
            return await evaluate(c, .deviceOwnerAuthenticationWithBiometrics)
        }
        XCTAssertEqual(code, .userCancel, "the hidden fallback must be ignored, the cancel must end it")
    }

    func testFallbackWithTheOwnerPolicyGoesToThePasscode() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(.nomatch, .fallback, .passcode("1234"))
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthentication) }
        XCTAssertNil(code)
    }

    func testFaceIDOffersRetryThenStops() async throws {
        let enclave = try TestEnclave(
            .with {
                $0.sensor = .faceID
                $0.enrolled = ["face"]
            }
        )
        // First miss: retry offered; second miss: no more Face ID, the fallback button appears.
        try enclave.queue(.nomatch, .retry, .nomatch, .match, .fallback)
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertEqual(code, .userFallback, "the match after the second failure must be ignored")
        XCTAssertEqual(try enclave.status().biometricFailures, 2)
    }

    func testInteractionNotAllowed() async throws {
        let enclave = try TestEnclave()
        let code = await enclave.run { () async -> LAError.Code? in
            let c = LAContext()
            c.interactionNotAllowed = true
            return await evaluate(c, .deviceOwnerAuthentication)
        }
        XCTAssertEqual(code, .notInteractive)
    }

    func testPromptTimeoutIsSystemCancel() async throws {
        let enclave = try TestEnclave(.with { $0.promptTimeout = 0.5 })
        let code = await enclave.run { await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics) }
        XCTAssertEqual(code, .systemCancel)
    }

    func testEmptyReasonIsRejectedWithAMessageNamingTheParameter() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            do {
                _ = try await LAContext().evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "")
                XCTFail("an empty reason must fail")
            } catch let e as LAError {
                XCTAssertEqual(e.code, .authenticationFailed)
                XCTAssertTrue(e.localizedDescription.contains("localizedReason"), e.localizedDescription)
            }
        }
    }

    func testUnreachableDaemonIsSystemCancel() async throws {
        let endpoint = EnclaveEndpoint(socketPath: "/tmp/no-such-laenclaved/socket", autostart: false, headless: true)
        await EnclaveEndpoint.$override.withValue(endpoint) {
            let c = LAContext()
            XCTAssertEqual(canEvaluate(c, .deviceOwnerAuthentication), .systemCancel)
            let code = await evaluate(c, .deviceOwnerAuthentication)
            XCTAssertEqual(code, .systemCancel)
        }
    }

    func testReplyRunsOffTheCallersThread() throws {
        let enclave = try TestEnclave()
        try enclave.queue(.match)
        let done = expectation(description: "reply")
        // Hold the context: releasing it would cancel the evaluation (as on Apple platforms).
        let context = enclave.run { LAContext() }
        enclave.run {
            context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Test") {
                success,
                error in
                XCTAssertTrue(success)
                XCTAssertNil(error)
                XCTAssertFalse(Thread.isMainThread, "the reply runs on a private queue")
                done.fulfill()
            }
        }
        wait(for: [done], timeout: 10)
    }
}
