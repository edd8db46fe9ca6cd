import ServiceLifecycle
#if canImport(Glibc)
import Glibc
#endif

/// Ends the daemon when the process that started it is gone (the testing kit's daemons: a test
/// runner that crashes must not leave daemons behind). The parent's death shows as a new ppid.
public struct ParentWatcher: Service {
    private let parent: pid_t

    public init() { parent = getppid() }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            if getppid() != parent { return }
            try? await Task.sleep(nanoseconds: 250_000_000)
        }
    }
}
