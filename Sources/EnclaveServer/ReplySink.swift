import EnclaveProtocol
import NIOCore
import Synchronization

/// Sends replies on one connection; several evaluations may answer at once.
protocol ReplySink: Sendable {
    func send(_ envelope: ReplyEnvelope)
    /// Codes every later reply so (after `hello`'s answer); a sink of values needs no coding.
    func speak(_ encoding: WireEncoding)
}

extension ReplySink {
    func speak(_ encoding: WireEncoding) {}
}

/// Replies of one connection, encoded where they are made and written straight to the channel
/// (which keeps their order): the daemon never waits on a client's socket — a client that stops
/// reading cannot hold the user's prompt — and a connection with more than `pendingLimit` replies
/// or `pendingBytesLimit` bytes not yet taken by the kernel is closed, so a client that never
/// reads holds a bounded amount of memory.
final class ChannelReplySink: ReplySink, Sendable {
    static let pendingLimit = 256
    static let pendingBytesLimit = 16 * (WireLimits.maxPayloadBytes + 4)
    private let channel: any Channel
    private struct Pending {
        /// Replies admitted and not yet written (or failed), and their bytes.
        var replies = 0
        var bytes = 0
        var finished = false
        /// `finish()`, waiting for the last of them.
        var drained: CheckedContinuation<Void, Never>?
    }
    private let pending = Mutex(Pending())
    private let binary = Atomic(false)

    init(channel: any Channel) {
        self.channel = channel
    }

    func speak(_ encoding: WireEncoding) { binary.store(encoding == .binary, ordering: .releasing) }

    func send(_ envelope: ReplyEnvelope) {
        let encoding: WireEncoding = binary.load(ordering: .acquiring) ? .binary : .json
        let frame: [UInt8]
        do { frame = try FrameEncoder.checkedFrame(envelope.encoded(encoding)) } catch {
            // A reply's size follows from the request (many or large items): answer that, never trap.
            let tooLarge = ReplyEnvelope(
                id: envelope.id,
                reply: .failure(
                    Failure(
                        .invalidParameter,
                        "the answer exceeds the \(WireLimits.maxPayloadBytes / 1024) KiB message limit; ask for fewer items or attributes"
                    )
                )
            )
            frame = FrameEncoder.frame(tooLarge.encoded(encoding))
        }
        let size = frame.count
        enum Admission { case write, close, drop }
        let admission: Admission = pending.withLock { pending in
            if pending.finished { return .drop }
            guard pending.replies < Self.pendingLimit, pending.bytes + size <= Self.pendingBytesLimit else {
                return .close
            }
            pending.replies += 1
            pending.bytes += size
            return .write
        }
        switch admission {
        case .drop: return
        case .close:
            channel.close(promise: nil)
            return
        case .write: break
        }
        channel.writeAndFlush(ByteBuffer(bytes: frame)).whenComplete { [self] _ in
            let drained = pending.withLock { pending -> CheckedContinuation<Void, Never>? in
                pending.replies -= 1
                pending.bytes -= size
                return pending.replies == 0 ? pending.drained.take() : nil
            }
            drained?.resume()
        }
    }

    /// No more replies: waits until every one admitted is written (or failed with the
    /// connection) — counted, not the last write seen, which two senders at once could misorder.
    func finish() async {
        await withCheckedContinuation { (drained: CheckedContinuation<Void, Never>) in
            let now = pending.withLock { pending -> Bool in
                pending.finished = true
                guard pending.replies > 0 else { return true }
                pending.drained = drained
                return false
            }
            if now { drained.resume() }
        }
    }
}
