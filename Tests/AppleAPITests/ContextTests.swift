import EnclaveClient
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

/// invalidate(), releasing a context, the context's authorization, and the reuse window.
final class ContextTests: XCTestCase {
    func testInvalidateDuringAPromptIsAppCancelThenInvalidContext() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            let context = LAContext()
            async let outcome = evaluate(context, .deviceOwnerAuthenticationWithBiometrics)
            try eventually("the prompt to open") { try enclave.status().promptOpen }
            context.invalidate()
            let code = await outcome
            XCTAssertEqual(code, .appCancel)
            XCTAssertEqual(canEvaluate(context, .deviceOwnerAuthentication), .invalidContext)
            let again = await evaluate(context, .deviceOwnerAuthentication)
            XCTAssertEqual(again, .invalidContext)
            context.invalidate()  // a second call does nothing
        }
        XCTAssertFalse(try enclave.status().promptOpen, "the prompt is released")
    }

    func testReleasingTheLastReferenceCancelsTheEvaluation() throws {
        let enclave = try TestEnclave()
        let replied = expectation(description: "reply")
        nonisolated(unsafe) var code: LAError.Code?
        try enclave.run {
            var context: LAContext? = LAContext()
            context!.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Test") { _, error in
                code = (error as? LAError)?.code
                replied.fulfill()
            }
            try eventually("the prompt to open") { try enclave.status().promptOpen }
            context = nil
        }
        wait(for: [replied], timeout: 10)
        XCTAssertEqual(code, .appCancel)
    }

    func testAnEvaluatedContextStaysAuthorizedWithoutAnotherPrompt() async throws {
        let enclave = try TestEnclave(.with { $0.promptTimeout = 2 })
        try enclave.queue(.match)
        await enclave.run {
            let context = LAContext()
            let first = await evaluate(context, .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertNil(first)
            // Nothing queued: a prompt would time out with systemCancel.
            let second = await evaluate(context, .deviceOwnerAuthentication)
            XCTAssertNil(second, "one logical action never prompts twice")
            let third = await evaluate(context, .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertNil(third)
            // Another context is not authorized.
            let other = await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertEqual(other, .systemCancel)
            _ = enclave
        }
    }

    func testAPasscodeAuthorizationDoesNotSatisfyTheBiometricPolicy() async throws {
        let enclave = try TestEnclave(.with { $0.promptTimeout = 1 })
        try enclave.queue(.passcode("1234"))
        await enclave.run {
            let context = LAContext()
            let first = await evaluate(context, .deviceOwnerAuthentication)
            XCTAssertNil(first)
            let second = await evaluate(context, .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertEqual(second, .systemCancel, "biometrics were never shown: a prompt is needed")
        }
    }

    func testTheAuthorizationExpiresAfterTheContextLifetime() async throws {
        let enclave = try TestEnclave(
            .with {
                $0.contextLifetime = 1
                $0.promptTimeout = 1
            }
        )
        try enclave.queue(.match)
        await enclave.run {
            let context = LAContext()
            let first = await evaluate(context, .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertNil(first)
            try? await Task.sleep(nanoseconds: 1_500_000_000)
            let later = await evaluate(context, .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertEqual(later, .systemCancel, "after its lifetime the context prompts again")
        }
    }

    func testReuseDurationSkipsThePromptAfterARecentMatch() async throws {
        let enclave = try TestEnclave(.with { $0.promptTimeout = 1 })
        try enclave.queue(.match)
        await enclave.run {
            let first = await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertNil(first)
            let noReuse = await evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertEqual(noReuse, .systemCancel, "the default reuse duration is 0")
            let context = LAContext()
            context.touchIDAuthenticationAllowableReuseDuration = 10_000  // clamps to 300 s
            let reused = await evaluate(context, .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertNil(reused)
            let quiet = LAContext()
            quiet.touchIDAuthenticationAllowableReuseDuration = 60
            quiet.interactionNotAllowed = true
            let silent = await evaluate(quiet, .deviceOwnerAuthentication)
            XCTAssertNil(silent, "reuse needs no interaction")
        }
    }

    /// Regression: releasing a context right after its reply must not deliver the reply twice.
    func testManyShortLivedContextsGetExactlyOneReplyEach() async throws {
        let enclave = try TestEnclave()
        try await enclave.run {
            for _ in 0..<300 {
                try enclave.queue(.match)
                let ok = try await LAContext().evaluatePolicy(
                    .deviceOwnerAuthenticationWithBiometrics,
                    localizedReason: "Test"
                )
                XCTAssertTrue(ok)
            }
        }
    }

    func testAContextStillWorksAfterAnotherContextWasInvalidated() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(.match)
        await enclave.run {
            let a = LAContext()
            let b = LAContext()
            a.invalidate()
            let code = await evaluate(b, .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertNil(code)
        }
    }

    func testEvaluatedPolicyDomainStateAfterBiometricSuccess() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(.match)
        await enclave.run {
            let context = LAContext()
            XCTAssertNil(context.evaluatedPolicyDomainState)
            let code = await evaluate(context, .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertNil(code)
            XCTAssertNotNil(context.evaluatedPolicyDomainState)
            XCTAssertEqual(context.evaluatedPolicyDomainState, context.domainState.biometry.stateHash)
            XCTAssertEqual(context.domainState.biometry.biometryType, .touchID)
        }
    }
}
