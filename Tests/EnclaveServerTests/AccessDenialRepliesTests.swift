import EnclaveCore
import EnclaveProtocol
import XCTest

@testable import EnclaveServer

/// `AccessDenial`, mapped once per surface at the daemon's edge.
final class AccessDenialRepliesTests: XCTestCase {
    func testEachSurfaceMapsADenialOnce() {
        XCTAssertEqual(KeychainFailure(.failed(.userCancel, "")).status, .userCanceled)
        XCTAssertEqual(KeychainFailure(.failed(.systemCancel, "")).status, .userCanceled)
        XCTAssertEqual(KeychainFailure(.failed(.notInteractive, "")).status, .interactionNotAllowed)
        XCTAssertEqual(KeychainFailure(.failed(.authenticationFailed, "")).status, .authFailed)
        XCTAssertEqual(KeychainFailure(.invalidated(.enrolmentChanged)).status, .invalidItemRef)
        XCTAssertEqual(KeychainFailure(.unavailable("x")).status, .notAvailable)
        XCTAssertEqual(KeyReply(.invalidated(.passcodeRemoved)).problem, .invalidated)
        XCTAssertEqual(KeyReply(.failed(.biometryLockout, "")).authenticationError, .biometryLockout)
        XCTAssertEqual(EvaluationResult(.failed(.userFallback, "f"), biometryType: .touchID).error, .userFallback)
        XCTAssertEqual(
            EvaluationResult(.invalidated(.enrolmentChanged), biometryType: .touchID).error,
            .authenticationFailed
        )
    }
}
