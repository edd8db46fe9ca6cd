import EnclaveClient
import EnclaveProtocol
import Foundation
import LocalAuthenticationTesting
import XCTest

/// Attack: a client opens prompts and cancels them as fast as the daemon answers. Each prompt's
/// timeout used to outlive the prompt by its full 300 s (a cancelled `Task.sleep` keeps its task
/// until its deadline), so the flood grew the daemon by ~800 bytes a prompt, ~1 MB a second —
/// in system mode, one daemon for every user. Now nothing of an ended prompt stays.
final class PromptFloodTests: XCTestCase {
    func testPromptsOpenedAndCancelledLeaveNothingBehind() throws {
        let enclave = try TestEnclave()
        let connection = try enclave.connection()
        func flood(_ prompts: Range<Int>) throws {
            for i in prompts {
                let context = "flood-\(i)"
                let shown = DispatchSemaphore(value: 0)
                let ended = DispatchSemaphore(value: 0)
                _ = connection.send(
                    .evaluate(.init(context: context, policy: 1, options: EvaluationOptions(reason: "flood"))),
                    onEvent: { _ in shown.signal() },
                    completion: { _ in ended.signal() }
                )
                guard shown.wait(timeout: .now() + 10) == .success else { return XCTFail("prompt \(i) never opened") }
                connection.sendDiscardingReply(.invalidate(.init(context: context)))
                guard ended.wait(timeout: .now() + 10) == .success else { return XCTFail("prompt \(i) never ended") }
            }
        }
        // The allocator's and the caches' first growth is not the flood's (SQLite's page cache
        // fills as the audit log grows: ~2 MB over the first prompts).
        try flood(0..<2_000)
        let before = try XCTUnwrap(Self.residentKiB(of: enclave.processID))
        try flood(2_000..<12_000)
        let after = try XCTUnwrap(Self.residentKiB(of: enclave.processID))
        print("daemon VmRSS over 10,000 prompts opened and cancelled: \(before) → \(after) KiB")
        // 10,000 prompts held for 300 s each were ~8 MB; what ended leaves nothing.
        XCTAssertLessThan(
            after - before,
            5_120,
            "the daemon grew from \(before) to \(after) KiB over 10,000 ended prompts"
        )
        XCTAssertFalse(try enclave.status().promptOpen)
    }

    private static func residentKiB(of pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
}
