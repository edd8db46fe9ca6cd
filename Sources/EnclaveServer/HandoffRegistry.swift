import EnclaveCore
import EnclaveProtocol
import Foundation
import Synchronization

/// The daemon's `HandoffTickets`, shared by the connections (which issue and revoke) and the
/// handoff loop (which redeems).
final class HandoffRegistry: Sendable {
    private let tickets = Mutex(HandoffTickets<HandedDescriptors>())
    /// Why no handoff socket is served; nil while one is. A ticket would be for nothing then, and
    /// a client would wait for an answer nobody gives where systemd holds the socket.
    private let notServed = Mutex<String?>("the handoff socket has not started")
    private let clock: any EnclaveClock

    init(clock: any EnclaveClock) { self.clock = clock }

    /// The handoff socket is served from now (`why` nil), or not, and why.
    func served(unlessBecause why: String?) { notServed.withLock { $0 = why } }

    /// Why no handoff socket is served; nil while one is.
    var notServedBecause: String? { notServed.withLock { $0 } }

    /// A ticket, or `notPermitted` saying why none is issued: the daemon serves no handoff socket.
    func issue(
        to owner: HandoffTickets<HandedDescriptors>.Owner,
        connection: UInt64,
        kind: HandedDescriptor,
        destination: HandedDescriptors
    ) throws(DaemonError) -> Data {
        if let why = notServedBecause {
            throw DaemonError(.notPermitted, "this daemon takes no handoffs: \(why)")
        }
        var generator = SystemRandomNumberGenerator()
        let token = Data((0..<Handoff.ticketBytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
        let now = clock.monotonic().seconds
        tickets.withLock {
            $0.issue(token, to: owner, connection: connection, kind: kind, destination: destination, now: now)
        }
        return token
    }

    func redeem(
        _ token: Data,
        by peer: HandoffTickets<HandedDescriptors>.Owner
    ) -> Result<HandoffTickets<HandedDescriptors>.Redeemed, HandoffStatus> {
        let now = clock.monotonic().seconds
        return tickets.withLock { $0.redeem(token, by: peer, now: now) }
    }

    func revoke(connection: UInt64) { tickets.withLock { $0.revoke(connection: connection) } }
}
