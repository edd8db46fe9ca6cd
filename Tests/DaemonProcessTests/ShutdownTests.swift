import EnclaveClient
import EnclaveProtocol
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class ShutdownTests: XCTestCase {
    func testSIGTERMDuringAPromptAnswersTheClientAndRemovesTheSocket() async throws {
        let enclave = try TestEnclave()
        let code = await enclave.run { () async -> LAError.Code? in
            async let outcome = evaluate(LAContext(), .deviceOwnerAuthenticationWithBiometrics)
            try? eventually("the prompt to open") { try enclave.status().promptOpen }
            enclave.stop()
            return await outcome
        }
        XCTAssertEqual(code, .systemCancel)
        XCTAssertFalse(FileManager.default.fileExists(atPath: enclave.socketPath), "a graceful stop removes the socket")
        try enclave.start()
        XCTAssertTrue(try enclave.status().passcodeSet, "state intact after the graceful stop")
    }
}
