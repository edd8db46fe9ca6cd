import NIOCore

/// How a connection's input ended.
public enum ReadEnding: Sendable, Equatable {
    /// The client closed its side (or the channel went): bytes of an unfinished frame are an error
    /// to answer.
    case ended
    /// Nothing more can be read: the socket failed, or the task stopped taking (it was cancelled).
    case stopped
}

/// The rules of one connection's reads, between its channel (which pushes what each read brought)
/// and the task that serves it (which takes them one at a time and cuts them into frames):
/// generic over the waiting task, so that they are tested without one (`ChannelInbox` performs
/// them under its lock). Back-pressure, as `NIOAsyncChannel`'s stream before it: with
/// `highWatermark` reads not yet taken the channel asks the socket for no more, until the task has
/// taken them down to `lowWatermark` — a client that sends faster than the daemon answers waits in
/// its own socket buffer, and the daemon holds about that many reads of its bytes (SwiftNIO makes
/// up to 4 reads of up to 64 KiB at a time: at most 11, as the stream's 10 + 3).
struct ReadQueue<Waiter> {
    static var highWatermark: Int { 8 }
    static var lowWatermark: Int { 2 }

    private var reads = CircularBuffer<ByteBuffer>()
    private var waiter: Waiter?
    private var ending: ReadEnding?
    /// A read the channel asked for and was told to hold back.
    private var readWithheld = false

    /// Reads pushed and not yet taken.
    var count: Int { reads.count }

    /// A read's bytes arrived. Returns the task to hand them to, if one waits.
    mutating func push(_ bytes: ByteBuffer) -> Waiter? {
        guard ending == nil else { return nil }
        if let waiter = waiter.take() { return waiter }
        reads.append(bytes)
        return nil
    }

    enum Taking: Equatable {
        /// Take these bytes; `readAgain`: the channel held back a read it must now make.
        case take(ByteBuffer, readAgain: Bool)
        /// Nothing more will come.
        case end(ReadEnding)
        /// Nothing yet: the waiter is kept, and the next push or ending hands it over.
        case wait
    }

    /// The task asks for the next read.
    mutating func next(_ waiter: Waiter) -> Taking {
        precondition(self.waiter == nil, "one task takes a connection's reads")
        if ending == .stopped { return .end(.stopped) }
        if let bytes = reads.popFirst() {
            let readAgain = readWithheld && reads.count <= Self.lowWatermark
            if readAgain { readWithheld = false }
            return .take(bytes, readAgain: readAgain)
        }
        if let ending { return .end(ending) }
        self.waiter = waiter
        return .wait
    }

    /// The input ended. Reads already in are still taken before an `ended`; a `stopped` drops
    /// them, and stands over an `ended` before or after it (an `ended` after either changes
    /// nothing). Returns the task to tell, if one waits.
    mutating func end(_ how: ReadEnding) -> Waiter? {
        if ending == nil || how == .stopped { ending = how }
        if how == .stopped { reads.removeAll() }
        return waiter.take()
    }

    /// The channel would read more: whether it may now. A read held back is made once the task has
    /// taken the reads down to `lowWatermark` (`next`'s `readAgain`).
    mutating func mayRead() -> Bool {
        guard reads.count >= Self.highWatermark else { return true }
        readWithheld = true
        return false
    }
}
