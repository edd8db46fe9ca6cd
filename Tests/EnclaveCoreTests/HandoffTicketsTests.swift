import EnclaveCore
import EnclaveProtocol
import Foundation
import XCTest

final class HandoffTicketsTests: XCTestCase {
    private typealias Tickets = HandoffTickets<String>
    private let app = Tickets.Owner(uid: 1000, pid: 42)
    private func token(_ byte: UInt8) -> Data { Data(repeating: byte, count: Handoff.ticketBytes) }

    func testRedeemRules() {
        struct Case {
            var name: String
            var peer: Tickets.Owner
            var token: Data
            var at: Double
            var expected: HandoffStatus?
        }
        let cases = [
            Case(name: "the owner, in time", peer: app, token: token(1), at: 5, expected: nil),
            Case(
                name: "another process of the same user",
                peer: .init(uid: 1000, pid: 43),
                token: token(1),
                at: 5,
                expected: .wrongProcess
            ),
            Case(
                name: "another user, same pid number",
                peer: .init(uid: 1001, pid: 42),
                token: token(1),
                at: 5,
                expected: .wrongProcess
            ),
            Case(
                name: "too late",
                peer: app,
                token: token(1),
                at: Handoff.ticketLifetime + 0.001,
                expected: .unknownTicket
            ),
            Case(name: "never issued", peer: app, token: token(2), at: 5, expected: .unknownTicket),
            Case(name: "too short", peer: app, token: Data([1]), at: 5, expected: .malformed),
        ]
        for c in cases {
            var tickets = Tickets()
            tickets.issue(token(1), to: app, connection: 7, kind: .terminal, destination: "connection 7", now: 0)
            switch tickets.redeem(c.token, by: c.peer, now: c.at) {
            case .success(let r):
                XCTAssertNil(c.expected, c.name)
                XCTAssertEqual(r.destination, "connection 7", c.name)
                XCTAssertEqual(r.kind, .terminal, c.name)
            case .failure(let status):
                XCTAssertEqual(status, c.expected, c.name)
            }
        }
    }

    func testATicketIsUsedOnceEvenWhenTheWrongProcessShowsIt() {
        var tickets = Tickets()
        tickets.issue(token(1), to: app, connection: 7, kind: .terminal, destination: "c7", now: 0)
        guard case .failure(.wrongProcess) = tickets.redeem(token(1), by: .init(uid: 1000, pid: 99), now: 1) else {
            return XCTFail()
        }
        guard case .failure(.unknownTicket) = tickets.redeem(token(1), by: app, now: 1) else { return XCTFail("spent") }
        tickets.issue(token(2), to: app, connection: 7, kind: .terminal, destination: "c7", now: 2)
        guard case .success = tickets.redeem(token(2), by: app, now: 3) else { return XCTFail() }
        guard case .failure(.unknownTicket) = tickets.redeem(token(2), by: app, now: 3) else { return XCTFail("used") }
    }

    func testANewTicketVoidsTheConnectionsOldOneAndCloseVoidsAll() {
        var tickets = Tickets()
        tickets.issue(token(1), to: app, connection: 7, kind: .terminal, destination: "c7", now: 0)
        tickets.issue(token(3), to: app, connection: 8, kind: .terminal, destination: "c8", now: 0)
        tickets.issue(token(2), to: app, connection: 7, kind: .terminal, destination: "c7", now: 1)
        XCTAssertEqual(tickets.count, 2)
        guard case .failure(.unknownTicket) = tickets.redeem(token(1), by: app, now: 2) else {
            return XCTFail("replaced")
        }
        tickets.revoke(connection: 7)
        guard case .failure(.unknownTicket) = tickets.redeem(token(2), by: app, now: 2) else {
            return XCTFail("revoked")
        }
        guard case .success = tickets.redeem(token(3), by: app, now: 2) else {
            return XCTFail("another connection's ticket stays")
        }
    }

    func testCapacityDropsTheOldestAndExpiredOnes() {
        var tickets = Tickets(capacity: 3)
        for i in 0..<5 {
            tickets.issue(
                token(UInt8(i)),
                to: app,
                connection: UInt64(i),
                kind: .terminal,
                destination: "c\(i)",
                now: Double(i)
            )
        }
        XCTAssertEqual(tickets.count, 3)
        guard case .failure(.unknownTicket) = tickets.redeem(token(0), by: app, now: 5) else {
            return XCTFail("oldest dropped")
        }
        guard case .success = tickets.redeem(token(4), by: app, now: 5) else { return XCTFail("newest kept") }
        tickets.issue(token(9), to: app, connection: 9, kind: .terminal, destination: "c9", now: 100)
        XCTAssertEqual(tickets.count, 1, "expired ones go when a ticket is issued")
    }
}
