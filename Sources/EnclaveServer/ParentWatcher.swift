import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// Ends the daemon when the process that started it is gone (the testing kit's daemons: a test
/// runner that crashes must not leave daemons behind). The parent's death shows as a new ppid.
public struct ParentWatcher: Service {
    private let parent: pid_t

    /// `parent`: the process that started the daemon, read as the daemon starts — read later (after
    /// its sockets are bound, which a parent may take as "ready" and then die) it could already
    /// be init's.
    public init(parent: pid_t) { self.parent = parent }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            if getppid() != parent { return }
            try? await Task.sleep(nanoseconds: 250_000_000)
        }
    }
}
