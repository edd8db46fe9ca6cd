import EnclaveCore
import EnclaveProtocol
import Logging
import NIOCore

/// One admitted connection's socket side: reads in (`ChannelInbox`), cut into frames
/// (`FrameDecoder`), replies out (`ChannelReplySink`), the hello deadline, and the pinned process
/// checked before each request; the requests themselves go to its `ConnectionHandler`. Apart from
/// the accept loop (`EnclaveService`), so that it runs on any channel — a test's
/// `NIOAsyncTestingChannel` too.
struct ConnectionShell {
    let daemon: EnclaveDaemon
    let logger: Logger

    /// How long a stopping daemon waits for a connection's replies to be written.
    static let stoppingGrace = TimeAmount.seconds(1)

    /// Runs `body` with the connection's reply sink; returns once the replies sent are written, and
    /// the connection is closed. When the daemon stops (the task is cancelled), replies get
    /// `stoppingGrace` to be written, then go with the connection: a client that stopped reading
    /// cannot hold the daemon's stop (before, it held it until systemd killed the daemon).
    static func open(_ channel: any Channel, _ body: (ChannelReplySink) async -> Void) async {
        let writer = ChannelReplySink(channel: channel)
        await body(writer)
        await withTaskCancellationHandler {
            await writer.finish()
        } onCancel: {
            _ = channel.eventLoop.scheduleTask(in: stoppingGrace) { channel.close(promise: nil) }
        }
        // Closed already when the client went.
        try? await channel.close()
    }

    /// Serves `peer`'s requests until the connection ends; everything its requests started has
    /// ended when it returns.
    func serve(
        _ channel: any Channel,
        inbox: ChannelInbox,
        writer: ChannelReplySink,
        peer: PeerIdentity,
        process: (any PinnedPeer)?,
        executor: (any TaskExecutor)?
    ) async {
        let handler = ConnectionHandler(peer: peer, daemon: daemon, sink: writer, logger: logger, executor: executor)
        // The requests' jobs are this group's tasks: nothing a connection started outlives it.
        await withDiscardingTaskGroup { jobs in
            defer { handler.closed() }
            await readRequests(
                channel,
                inbox: inbox,
                writer: writer,
                handler: handler,
                peer: peer,
                process: process,
                jobs: &jobs
            )
        }
    }

    private func readRequests(
        _ channel: any Channel,
        inbox: ChannelInbox,
        writer: ChannelReplySink,
        handler: ConnectionHandler,
        peer: PeerIdentity,
        process: (any PinnedPeer)?,
        jobs: inout DiscardingTaskGroup
    ) async {
        // A connection that never says hello holds a descriptor and a slot of its user's budget.
        let helloDeadline = channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(daemon.config.helloTimeout * 1e9))) {
            if handler.helloDeadlinePassed() { channel.close(promise: nil) }
        }
        defer { helloDeadline.cancel() }
        var decoder = FrameDecoder()
        do throws(WireError) {
            reading: while true {
                switch await inbox.next() {
                case .bytes(let buffer): decoder.append(buffer.readableBytesView)
                case .end(.ended): break reading
                case .end(.stopped): return
                }
                while let frame = try decoder.nextFrame() {
                    // The connection is the pinned process's, running what it ran when pinned.
                    if process?.executableChanged() == true {
                        logger.notice(
                            "closing a connection whose process ran another executable or ended",
                            metadata: ["pid": "\(peer.pid)", "app": "\(peer.app)"]
                        )
                        writer.send(
                            ReplyEnvelope(
                                id: 0,
                                reply: .failure(
                                    Failure(
                                        .notPermitted,
                                        "the process that opened this connection runs another executable now, or has ended"
                                    )
                                )
                            )
                        )
                        return
                    }
                    let received = await handler.receive(frame, followed: decoder.holdsMore)
                    if let job = received.job { jobs.addImmediateTask(operation: job) }
                    guard received.open else { return }
                }
            }
            try decoder.finish()
        } catch {
            logger.notice(
                "closing a connection with broken framing",
                metadata: ["pid": "\(peer.pid)", "error": "\(error)"]
            )
            writer.send(ReplyEnvelope(id: 0, reply: .failure(error.failure)))
        }
    }
}
