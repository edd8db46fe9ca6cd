import EnclaveProtocol
import EnclaveServer
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// The floor of the daemon's socket shell, measured beside the raw pair: the same echo with the
/// daemon's I/O and nothing else — SwiftNIO's event loop, reads handed to a task on the channel's
/// event loop (`EventLoopTaskExecutor`) by the daemon's own `ChannelInbox`, frames cut there by
/// `FrameDecoder` — and, below
/// it, SwiftNIO's own floor: a plain channel handler echoing on the event loop. The shell before
/// 2026-11-30 (`NIOAsyncChannel`, frames cut by the task) stays beside them, for the comparison.
/// What the daemon adds above the shell is the request's own work (the coding, the identity
/// check, the rules); what the shell adds above the raw pair is the library's.
///   la-bench nio-echo-server PATH shell|async-channel|handler
enum NIOSocketEcho {
    enum Shape: String {
        case shell
        case asyncChannel = "async-channel"
        case handler
    }

    static func serve(path: String, shape: Shape) async throws -> Never {
        unlink(path)
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
        switch shape {
        case .handler:
            let server =
                try await bootstrap
                .childChannelInitializer { $0.pipeline.addHandler(EchoHandler(path: path)) }
                .bind(unixDomainSocketPath: path).get()
            print("ready")
            fflush(nil)
            try await server.closeFuture.get()
        case .shell:
            let server =
                try await bootstrap
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let inbox = try ChannelInbox.install(on: channel)
                        connectionOpened()
                        Task(executorPreference: EventLoopTaskExecutor(channel.eventLoop)) {
                            var decoder = FrameDecoder()
                            while case .bytes(let buffer) = await inbox.next() {
                                decoder.append(buffer.readableBytesView)
                                while let frame = try? decoder.nextFrame() {
                                    channel.writeAndFlush(ByteBuffer(bytes: FrameEncoder.frame(frame)), promise: nil)
                                }
                            }
                            try? await channel.close()
                            connectionClosed(path: path)
                        }
                    }
                }
                .bind(unixDomainSocketPath: path).get()
            print("ready")
            fflush(nil)
            try await server.closeFuture.get()
        case .asyncChannel:
            let server = try await bootstrap.bind(unixDomainSocketPath: path) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
            print("ready")
            fflush(nil)
            try await server.executeThenClose { inbound in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in inbound {
                        connectionOpened()
                        group.addTask(executorPreference: EventLoopTaskExecutor(connection.channel.eventLoop)) {
                            try? await echo(connection)
                            connectionClosed(path: path)
                        }
                    }
                }
            }
        }
        exit(0)
    }

    /// Connections open now: the server serves one client's connections, and ends when the last
    /// one goes (or breaks).
    private static let open = Atomic<Int>(0)

    private static func connectionOpened() { open.add(1, ordering: .relaxed) }

    private static func connectionClosed(path: String) {
        guard open.subtract(1, ordering: .relaxed).newValue == 0 else { return }
        unlink(path)
        exit(0)
    }

    private static func echo(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async throws {
        try await connection.executeThenClose { inbound, _ in
            var decoder = FrameDecoder()
            for try await buffer in inbound {
                decoder.append(buffer.readableBytesView)
                while let frame = try decoder.nextFrame() {
                    // As the daemon's `ChannelReplySink` writes a reply: straight to the channel,
                    // not waiting for the kernel to take it.
                    connection.channel.writeAndFlush(ByteBuffer(bytes: FrameEncoder.frame(frame)), promise: nil)
                }
            }
        }
    }

    /// Writes back whatever arrives; the client's frames come back whole.
    private final class EchoHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let path: String

        init(path: String) { self.path = path }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(data, promise: nil)
        }

        func channelActive(context: ChannelHandlerContext) { NIOSocketEcho.connectionOpened() }

        func channelInactive(context: ChannelHandlerContext) { NIOSocketEcho.connectionClosed(path: path) }
    }
}
