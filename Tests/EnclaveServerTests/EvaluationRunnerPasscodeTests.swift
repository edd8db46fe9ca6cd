import EnclaveCore
import EnclaveProtocol
import Foundation
import Logging
import XCTest

@testable import EnclaveServer

/// A typed passcode's check inside an evaluation, against one user's session: its answer, or the
/// evaluation's end with the reason the check could not run.
final class EvaluationRunnerPasscodeTests: XCTestCase {
    private var directory: String!
    private var daemon: EnclaveDaemon!

    override func setUp() async throws {
        directory = NSTemporaryDirectory() + "runner-passcode-\(UUID().uuidString)"
        daemon = try EnclaveDaemon(
            config: .inProcess(directory, passcodeCost: 10),
            clock: ManualClock(),
            logger: Logger(label: "test")
        )
    }

    override func tearDown() async throws {
        daemon = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func runner() -> EvaluationRunner {
        let (inputs, continuation) = AsyncStream<SessionInput>.makeStream()
        return EvaluationRunner(
            policy: .deviceOwnerAuthentication,
            passcodeOnly: true,
            options: EvaluationOptions(reason: "test"),
            app: "/usr/bin/example-app",
            authorization: nil,
            inputs: inputs,
            continuation: continuation,
            show: { _ in },
            audit: { outcome in
                AuditEntry(
                    time: Date(),
                    uid: 0,
                    pid: 0,
                    app: "",
                    operation: "evaluate",
                    policy: nil,
                    result: "\(outcome)"
                )
            },
            end: RequestEnd()
        )
    }

    func testAPasscodeGoneEndsTheEvaluationSayingSo() async throws {
        let session = try daemon.session(for: getuid())
        let removed = await runner().check("123456", on: session)
        XCTAssertEqual(removed, .systemCancel("The device passcode was removed during the evaluation."))

        try await session.setPasscode(current: nil, new: "123456")
        guard case .passcodeChecked(correct: true, _) = await runner().check("123456", on: session) else {
            return XCTFail("the right passcode was not checked as right")
        }
        guard case .passcodeChecked(correct: false, _) = await runner().check("654321", on: session) else {
            return XCTFail("a wrong passcode was not checked as wrong")
        }
    }
}
