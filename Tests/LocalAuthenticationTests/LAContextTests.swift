import EnclaveClient
import Foundation
import LocalAuthentication
import XCTest

/// An `LAContext` with no daemon to ask: the error's description carries why and what fixes it,
/// the same line the process said once on standard error.
final class LAContextTests: XCTestCase {
    func testNoDaemonIsSystemCancelWithTheReasonAndTheFix() async throws {
        let path = NSTemporaryDirectory() + "no-daemon-lacontext-\(getpid())/socket"
        let endpoint = EnclaveEndpoint(socketPath: path, autostart: false, headless: true)
        DaemonDiagnostics.reset()
        let previous = DaemonDiagnostics.setWriter { _ in }
        defer {
            DaemonDiagnostics.setWriter(previous)
            DaemonDiagnostics.reset()
        }
        let context = EnclaveEndpoint.$override.withValue(endpoint) { LAContext() }
        var error: NSError?
        XCTAssertFalse(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        let line = try XCTUnwrap(DaemonDiagnostics.lastUnavailability).description
        XCTAssertEqual(error?.code, LAError.Code.systemCancel.rawValue)
        XCTAssertEqual(error?.localizedDescription, line)
        XCTAssertTrue(line.contains("nothing answers there") && line.contains("Fix: start a daemon there"), line)

        do {
            _ = try await EnclaveEndpoint.$override.withValue(endpoint) { LAContext() }
                .evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock")
            XCTFail("evaluated with no daemon")
        } catch let e as LAError {
            XCTAssertEqual(e.code, .systemCancel)
            XCTAssertEqual(e.message, line)
        }
    }

    /// Apple's `async` form calls the callback method, so a subclass that overrides the callback
    /// form (a test double, say) answers `try await evaluatePolicy` too. Ours keeps that, though
    /// the plain class's `async` form resumes from the reader with no reply queue between.
    func testASubclassOverridingTheCallbackFormAnswersTheAsyncForm() async throws {
        final class Answering: LAContext, @unchecked Sendable {
            override func evaluatePolicy(
                _ policy: LAPolicy,
                localizedReason: String,
                reply: @escaping @Sendable (Bool, (any Error)?) -> Void
            ) {
                reply(false, LAError(.userFallback))
            }
        }
        do {
            _ = try await Answering().evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock")
            XCTFail("the override answered false")
        } catch let e as LAError {
            XCTAssertEqual(e.code, .userFallback)
        }
    }
}
