import CryptoKit
import LocalAuthentication
import TouchLoginAPI
import XCTest

@testable import TouchLoginClient

final class ClientErrorTests: XCTestCase {
    /// What LocalAuthentication, the enclave key and the server throw, as the login flow's reasons.
    func testEachErrorIsTheFlowsReason() {
        let rows: [(String, any Error, FingerprintProblem)] = [
            ("the person cancelled", LAError(.userCancel), .cancelled),
            ("the app cancelled", LAError(.appCancel), .cancelled),
            ("the password was chosen", LAError(.userFallback), .cancelled),
            ("a finger not recognised", LAError(.authenticationFailed), .notRecognised),
            ("locked out", LAError(.biometryLockout), .lockedOut),
            ("a key the enrolment killed", SecureEnclaveKeyError.keyInvalidated("enrolment changed"), .keyInvalidated),
            ("a revoked device", APIError(.unknownCredential, "gone"), .deviceRevoked),
            ("a server's refusal", APIError(.challengeExpired, "late"), .server("late (challenge_expired)")),
            ("our own", ClientError(.deviceRevoked), .deviceRevoked),
        ]
        for (what, error, problem) in rows {
            XCTAssertEqual(ClientError.fingerprintProblem(of: error), problem, what)
        }
    }

    func testAFingerprintErrorSaysItsReason() {
        let error = ClientError(.lockedOut)
        XCTAssertEqual(error.code, .fingerprint)
        XCTAssertEqual(error.description, FingerprintProblem.lockedOut.explanation)
        XCTAssertNil(ClientError(.stateFile, "damaged").problem)
    }
}
