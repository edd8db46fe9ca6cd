import EnclaveCore
import EnclaveProtocol
import XCTest

/// Connections per user and in all: one user's flood never takes another user's place.
final class ConnectionBudgetTests: XCTestCase {
    func testAUserIsRefusedAtTheirLimitAndOthersStillGetIn() {
        var budget = ConnectionBudget(limits: .init(perUser: 3, total: 10))
        for _ in 0..<3 { XCTAssertNil(budget.admit(1000)) }
        XCTAssertEqual(budget.admit(1000), .userFull(limit: 3))
        XCTAssertEqual(budget.connections(of: 1000), 3, "a refusal counts nothing")
        XCTAssertNil(budget.admit(0), "another user still gets in")
        budget.release(1000)
        XCTAssertNil(budget.admit(1000), "a closed connection makes room")
    }

    func testTheTotalBoundsEveryoneTogether() {
        var budget = ConnectionBudget(limits: .init(perUser: 3, total: 5))
        for uid: UInt32 in [1, 1, 2, 2, 3] { XCTAssertNil(budget.admit(uid)) }
        XCTAssertEqual(budget.admit(4), .daemonFull(limit: 5))
        XCTAssertEqual(budget.total, 5)
        budget.release(3)
        XCTAssertNil(budget.admit(4))
    }

    func testReleasingWhatWasNeverAdmittedChangesNothing() {
        var budget = ConnectionBudget(limits: .init(perUser: 2, total: 4))
        budget.release(7)
        XCTAssertEqual(budget.total, 0)
        XCTAssertNil(budget.admit(7))
        budget.release(7)
        budget.release(7)
        XCTAssertEqual(budget.total, 0)
        XCTAssertEqual(budget.connections(of: 7), 0)
    }

    func testRefusalsAnswerBusyAndSayWhy() {
        XCTAssertEqual(ConnectionBudget.Refusal.userFull(limit: 256).failure.code, .busy)
        XCTAssertTrue(ConnectionBudget.Refusal.userFull(limit: 256).failure.message.contains("256"))
        XCTAssertEqual(ConnectionBudget.Refusal.daemonFull(limit: 4096).failure.code, .busy)
    }

    /// Each connection holds two descriptors (its socket and its client's pinned /proc/PID).
    func testTheDescriptorArithmetic() {
        let cases: [(connections: Int, descriptors: Int)] = [(4096, 8320), (256, 640), (1, 130)]
        for c in cases {
            XCTAssertEqual(ConnectionBudget.descriptors(forConnections: c.connections), c.descriptors)
            XCTAssertEqual(ConnectionBudget.connections(forDescriptors: c.descriptors), c.connections)
        }
        XCTAssertEqual(ConnectionBudget.connections(forDescriptors: 1024), 448, "a process's usual 1,024 descriptors")
        XCTAssertEqual(ConnectionBudget.connections(forDescriptors: 100), 1, "never none")
        XCTAssertEqual(ConnectionBudget(limits: .standard).descriptorsNeeded, 8320)
    }
}
