import EnclaveCore
import EnclaveProtocol
import XCTest

@testable import EnclaveServer

/// Who is issued a handoff ticket, by who may hand over (`HandoffSocketSetting.Access`), and what
/// the others are told.
final class HandoffRegistryTests: XCTestCase {
    func testTicketsGoOnlyToWhoMayHandOver() {
        let rows: [(HandoffSocketSetting.Access, uid: UInt32, refusal: String?)] = [
            (.everyone, 0, nil),
            (.everyone, 1000, nil),
            (.rootOnly(why: "handoff = root"), 0, nil),
            (.rootOnly(why: "handoff = root"), 1000, "this daemon takes handoffs from root only: handoff = root"),
            (.nobody(why: "handoff = never"), 0, "this daemon takes no handoffs: handoff = never"),
            (.nobody(why: "handoff = never"), 1000, "this daemon takes no handoffs: handoff = never"),
        ]
        for (access, uid, refusal) in rows {
            let registry = HandoffRegistry(clock: ManualClock())
            registry.serve(access)
            XCTAssertEqual(registry.refusal(for: uid), refusal, "\(access) \(uid)")
            let owner = HandoffTickets<HandedDescriptors>.Owner(uid: uid, pid: 1)
            do {
                let ticket = try registry.issue(
                    to: owner,
                    connection: 1,
                    kind: .terminal,
                    destination: HandedDescriptors()
                )
                XCTAssertNil(refusal, "a ticket despite \(refusal ?? "")")
                XCTAssertEqual(ticket.count, Handoff.ticketBytes)
            } catch {
                XCTAssertEqual(error, DaemonError(.notPermitted, refusal ?? "issued"), "\(access) \(uid)")
            }
        }
    }

    func testNobodyIsIssuedATicketBeforeTheSocketIsServed() {
        let registry = HandoffRegistry(clock: ManualClock())
        XCTAssertEqual(registry.refusal(for: 0), "this daemon takes no handoffs: the handoff socket has not started")
    }
}
