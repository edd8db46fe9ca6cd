import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

// From Apple's documentation ("Logging a User into Your App with Face ID or Touch ID"), unchanged.
func logIn(with context: LAContext) {
    context.localizedCancelTitle = "Enter Username/Password"
    var error: NSError?
    guard context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error) else {
        print(error?.localizedDescription ?? "Can't evaluate policy")
        return
    }
    Task {
        do {
            try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Log in to your account")
            print("logged in")
        } catch let error {
            print(error.localizedDescription)
        }
    }
}

/// The sample compiles unchanged; its outcome is read from the daemon's audit log, the one
/// witness outside the sample's own prints.
final class AppleSampleTests: XCTestCase {
    private func lastEvaluation(_ enclave: TestEnclave) throws -> String? {
        guard case .audit(let entries) = try enclave.send(.audit(.init(limit: 10, everyApp: false))) else { return nil }
        return entries.first { $0.operation == "evaluate" }?.result
    }

    func testSampleSucceedsOnAQueuedMatch() throws {
        let enclave = try TestEnclave()
        try enclave.queue(.match)
        enclave.run { logIn(with: LAContext()) }
        try eventually("the sample's evaluation to finish") { try lastEvaluation(enclave) != nil }
        XCTAssertEqual(try lastEvaluation(enclave), "success(biometric)")
    }

    func testSampleFailsWithUserCancelOnAQueuedCancel() throws {
        let enclave = try TestEnclave()
        try enclave.queue(.cancel)
        enclave.run { logIn(with: LAContext()) }
        try eventually("the sample's evaluation to finish") { try lastEvaluation(enclave) != nil }
        XCTAssertEqual(try lastEvaluation(enclave), "userCancel(\(LAError.Code.userCancel.rawValue))")
    }

    func testSampleStopsAtCanEvaluateWithoutAPasscode() throws {
        let enclave = try TestEnclave(.with { $0.passcode = nil })
        enclave.run { logIn(with: LAContext()) }
        usleep(200_000)
        XCTAssertNil(try lastEvaluation(enclave), "without a passcode the sample must not evaluate")
    }
}
