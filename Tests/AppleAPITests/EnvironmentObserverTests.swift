import EnclaveClient
import EnclaveProtocol
import IntegrationSupport
import LocalAuthentication
import LocalAuthenticationTesting
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class EnvironmentObserverTests: XCTestCase {
    private final class Watcher: LAEnvironmentObserver, @unchecked Sendable {
        let changed: XCTestExpectation
        init(_ e: XCTestExpectation) { changed = e }
        func environment(_ environment: LAEnvironment, stateDidChangeFromOldState oldState: LAEnvironmentState) {
            if oldState.biometry?.isLockedOut == false && environment.state.biometry?.isLockedOut == true {
                changed.fulfill()
            }
        }
    }

    func testObserversHearOfALockout() async throws {
        let enclave = try TestEnclave()
        let changed = expectation(description: "lockout observed")
        let watcher = Watcher(changed)
        let environment = enclave.run { LAEnvironment.currentUser }
        try await enclave.run {
            environment.addObserver(watcher)
            try await Task.sleep(nanoseconds: 1_500_000_000)
            try enclave.remoteLock()
        }
        await fulfillment(of: [changed], timeout: 10)
        environment.removeObserver(watcher)
    }
}
