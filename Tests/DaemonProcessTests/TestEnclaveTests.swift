import EnclaveClient
import Foundation
import LocalAuthenticationTesting
import XCTest

/// The test kit's daemon: one that dies while starting says why in the error the test sees (its
/// standard error, kept beside its log), not only where its log was — gone with the kit's
/// directory by the time anyone reads the report.
final class TestEnclaveTests: XCTestCase {
    func testADaemonThatDiesStartingLeavesItsLastWordsInTheError() throws {
        var configuration = TestEnclave.Configuration()
        configuration.extraArguments = ["--no-such-option"]
        XCTAssertThrowsError(try TestEnclave(configuration)) { error in
            let said = "\(error)"
            XCTAssertTrue(said.contains("exited during start"), said)
            XCTAssertTrue(said.contains("--no-such-option"), "the daemon's own complaint: \(said)")
        }
    }
}
