import EnclaveProtocol
import Foundation

/// The tickets of the handoff socket (`Handoff`): who may hand which descriptor to which
/// connection, until when. Pure: the shell draws the random bytes and reads the clock.
public struct HandoffTickets<Destination> {
    /// The process a ticket was issued to, from the kernel's credentials of its connection.
    public struct Owner: Sendable, Equatable {
        public var uid: UInt32
        public var pid: Int32
        public init(uid: UInt32, pid: Int32) {
            self.uid = uid
            self.pid = pid
        }
    }

    public struct Redeemed {
        public var kind: HandedDescriptor
        public var destination: Destination
    }

    private struct Entry {
        var owner: Owner
        var connection: UInt64
        var kind: HandedDescriptor
        var expires: Double
        var destination: Destination
    }

    /// Every connection holds at most one ticket per kind, so this is reached only when the
    /// connection limit is; then the oldest tickets are the first to go.
    public let capacity: Int
    private var entries: [Data: Entry] = [:]

    public init(capacity: Int = 8_192) { self.capacity = capacity }

    public var count: Int { entries.count }

    /// Issues `token` for `connection`; a ticket the connection held for the same kind is void.
    public mutating func issue(
        _ token: Data,
        to owner: Owner,
        connection: UInt64,
        kind: HandedDescriptor,
        destination: Destination,
        now: Double
    ) {
        entries = entries.filter {
            $0.value.expires > now && !($0.value.connection == connection && $0.value.kind == kind)
        }
        while entries.count >= capacity, let oldest = entries.min(by: { $0.value.expires < $1.value.expires }) {
            entries[oldest.key] = nil
        }
        entries[token] = Entry(
            owner: owner,
            connection: connection,
            kind: kind,
            expires: now + Handoff.ticketLifetime,
            destination: destination
        )
    }

    /// Uses the ticket, once, for the process the kernel says is on the handoff socket. A ticket
    /// shown by another process is spent too: whoever learned it gets no second try.
    public mutating func redeem(_ token: Data, by peer: Owner, now: Double) -> Result<Redeemed, HandoffStatus> {
        guard token.count == Handoff.ticketBytes else { return .failure(.malformed) }
        guard let entry = entries.removeValue(forKey: token), entry.expires > now else {
            return .failure(.unknownTicket)
        }
        guard entry.owner == peer else { return .failure(.wrongProcess) }
        return .success(Redeemed(kind: entry.kind, destination: entry.destination))
    }

    /// The connection closed: its tickets are void.
    public mutating func revoke(connection: UInt64) {
        entries = entries.filter { $0.value.connection != connection }
    }
}
