import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

/// The Apple sample flows through the real daemon in its own process.
final class EvaluatePolicyTests: XCTestCase {
    func testBiometricMatchSucceeds() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(.match)
        try await enclave.run {
            let context = LAContext()
            var error: NSError?
            XCTAssertTrue(
                context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error),
                "\(String(describing: error))"
            )
            XCTAssertEqual(context.biometryType, .touchID)
            let ok = try await context.evaluatePolicy(
                .deviceOwnerAuthenticationWithBiometrics,
                localizedReason: "Unlock the vault"
            )
            XCTAssertTrue(ok)
        }
    }

    func testQueuedCancelFailsWithUserCancel() async throws {
        let enclave = try TestEnclave()
        try enclave.queue(.cancel)
        try await enclave.run {
            do {
                try await LAContext().evaluatePolicy(
                    .deviceOwnerAuthentication,
                    localizedReason: "Log in to your account"
                )
                XCTFail("a cancelled prompt must not succeed")
            } catch let error as LAError {
                XCTAssertEqual(error.code, .userCancel)
            }
        }
    }
}
