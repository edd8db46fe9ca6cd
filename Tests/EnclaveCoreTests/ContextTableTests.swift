import EnclaveCore
import EnclaveProtocol
import XCTest

/// A connection's contexts as a value: admission, authorization, what ends with a context.
final class ContextTableTests: XCTestCase {
    private typealias Table = ContextTable<String>
    private let t0 = MonotonicStamp(bootID: "boot", seconds: 1_000)

    func testAnEvaluationIsAdmittedOncePerContext() throws {
        var table = Table()
        XCTAssertEqual(try table.admit("a", evaluation: "first"), .started(nil))
        XCTAssertEqual(try table.admit("a", evaluation: "second"), .busy)
        XCTAssertEqual(try table.admit("b", evaluation: "other"), .started(nil), "contexts are independent")
        XCTAssertEqual(table.evaluation("a"), "first")
        table.finish("a", proven: nil, now: t0, lifetime: 300)
        XCTAssertNil(table.evaluation("a"))
        XCTAssertEqual(try table.admit("a", evaluation: "third"), .started(nil))
    }

    func testWhatAnEvaluationProvedIsHandedToTheNextOne() throws {
        var table = Table()
        _ = try table.admit("a", evaluation: "e")
        let proven = ContextAuthorization(at: t0, biometric: true)
        table.finish("a", proven: proven, now: t0, lifetime: 300)
        XCTAssertEqual(try table.admit("a", evaluation: "e2"), .started(proven))
        // A later passcode proof joins the biometric one.
        table.finish(
            "a",
            proven: ContextAuthorization(at: t0, biometric: false, passcode: true),
            now: t0,
            lifetime: 300
        )
        guard case .started(let merged?) = try table.admit("a", evaluation: "e3") else { return XCTFail() }
        XCTAssertTrue(merged.biometric && merged.passcode)
    }

    func testInvalidationEndsEverythingOnTheContextAndIsFinal() throws {
        var table = Table()
        _ = try table.admit("a", evaluation: "evaluation")
        let first = try XCTUnwrap(try table.track("a", "keychain read"))
        _ = try XCTUnwrap(try table.track("a", "key use"))
        table.untrack("a", ticket: first)
        _ = try table.track("b", "elsewhere")
        XCTAssertEqual(table.invalidate("a"), ["evaluation", "key use"])
        XCTAssertEqual(try table.admit("a", evaluation: "again"), .invalidated)
        XCTAssertNil(try table.track("a", "late"), "nothing is tracked on an invalidated context")
        XCTAssertFalse(try table.use("a"))
        XCTAssertTrue(try table.use("b"))
        XCTAssertEqual(table.invalidate("a"), [], "invalidating twice ends nothing more")
        table.finish("a", proven: ContextAuthorization(at: t0, biometric: true), now: t0, lifetime: 300)
        XCTAssertNil(table.entry("a"), "an evaluation that ends after invalidation leaves nothing behind")
    }

    func testClosingEndsEveryRequestOnEveryContext() throws {
        var table = Table()
        _ = try table.admit("a", evaluation: "evaluation a")
        _ = try table.track("a", "request a")
        _ = try table.track("a", "second request a")
        _ = try table.admit("b", evaluation: "evaluation b")
        XCTAssertEqual(Set(table.close()), ["evaluation a", "request a", "second request a", "evaluation b"])
        XCTAssertEqual(table.liveCount, 0)
    }

    func testUpdateChangesOnlyARunningRequest() throws {
        var table = Table()
        let ticket = try XCTUnwrap(try table.track("a", "started"))
        table.update("a", ticket: ticket) { $0 += " with its task" }
        XCTAssertEqual(table.entry("a")?.work[ticket], "started with its task")
        table.untrack("a", ticket: ticket)
        table.update("a", ticket: ticket) { $0 = "revived" }
        XCTAssertNil(table.entry("a")?.work[ticket], "an ended request stays ended")
    }

    func testLiveContextsAreBounded() throws {
        var table = Table()
        for i in 0..<Table.maxLive { XCTAssertTrue(try table.use("c\(i)")) }
        XCTAssertThrowsError(try table.use("one too many")) { error in
            XCTAssertEqual((error as? Failure)?.code, .invalidParameter)
        }
        XCTAssertTrue(try table.use("c0"), "an existing context is still served")
        _ = table.invalidate("c0")
        XCTAssertTrue(try table.use("now there is room"))
    }

    func testInvalidatedIdsAreRememberedUpToTheirBound() throws {
        var table = Table()
        for i in 0...Table.maxTombstones { _ = table.invalidate("gone\(i)") }
        XCTAssertTrue(try table.use("gone0"), "the oldest invalidated id was forgotten")
        XCTAssertFalse(try table.use("gone1"))
        XCTAssertFalse(try table.use("gone\(Table.maxTombstones)"))
        // Over several laps of the ring: always exactly the newest `maxTombstones` are remembered.
        var ring = Table()
        let total = 2 * Table.maxTombstones + 7
        for i in 0..<total { _ = ring.invalidate("lap\(i)") }
        for i in [0, total - Table.maxTombstones - 1] {
            XCTAssertTrue(try ring.use("lap\(i)"), "lap\(i) was forgotten")
        }
        for i in [total - Table.maxTombstones, total - 1] {
            XCTAssertFalse(try ring.use("lap\(i)"), "lap\(i) is remembered")
        }
    }

    func testRunningRequestsAreBoundedPerConnection() throws {
        var table = Table()
        var tickets: [(String, UInt64)] = []
        for i in 0..<Table.maxRunning {
            let context = "c\(i % 3)"
            tickets.append((context, try XCTUnwrap(try table.track(context, "request \(i)"))))
        }
        XCTAssertThrowsError(try table.track("c0", "one too many")) { error in
            XCTAssertEqual((error as? Failure)?.code, .busy)
        }
        let (context, ticket) = tickets.removeFirst()
        table.untrack(context, ticket: ticket)
        table.untrack(context, ticket: ticket)
        XCTAssertEqual(table.running, Table.maxRunning - 1, "untracking twice frees one slot")
        XCTAssertNotNil(try table.track("c0", "now there is room"))
        _ = table.invalidate("c1")
        XCTAssertLessThan(
            table.running,
            Table.maxRunning - 1,
            "an invalidated context's requests are no longer running"
        )
        _ = table.close()
        XCTAssertEqual(table.running, 0)
    }
}
