import EnclaveCore
import EnclaveProtocol
import Foundation
import Synchronization

/// The daemon's `HandoffTickets`, shared by the connections (which issue and revoke) and the
/// handoff loop (which redeems).
final class HandoffRegistry: Sendable {
    private let tickets = Mutex(HandoffTickets<HandedDescriptors>())
    /// Who may hand over now (`HandoffSocketSetting.Access`): nobody until the socket is served.
    /// A ticket for anyone else would be for nothing, and a client would wait for an answer
    /// nobody gives where systemd holds the socket.
    private let access = Mutex(HandoffSocketSetting.Access.nobody(why: "the handoff socket has not started"))
    private let clock: any EnclaveClock

    init(clock: any EnclaveClock) { self.clock = clock }

    /// Who may hand over from now.
    func serve(_ access: HandoffSocketSetting.Access) { self.access.withLock { $0 = access } }

    /// Why a process of `uid` may hand nothing over (nil when it may), said to it.
    func refusal(for uid: UInt32) -> String? {
        switch access.withLock({ $0 }) {
        case .everyone: return nil
        case .rootOnly(let why): return uid == 0 ? nil : "\(Handoff.refusedToAllButRoot): \(why)"
        case .nobody(let why): return "\(Handoff.refusedToEveryone): \(why)"
        }
    }

    /// A ticket, or `notPermitted` saying why none is issued to `owner` (`refusal(for:)`).
    func issue(
        to owner: HandoffTickets<HandedDescriptors>.Owner,
        connection: UInt64,
        kind: HandedDescriptor,
        destination: HandedDescriptors
    ) throws(DaemonError) -> Data {
        if let refusal = refusal(for: owner.uid) { throw DaemonError(.notPermitted, refusal) }
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
