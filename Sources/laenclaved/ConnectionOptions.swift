import ArgumentParser
import EnclaveCore

/// How the daemon's sockets take connections: their limits, and whether the handoff socket is
/// served (`HandoffSocketSetting`).
struct ConnectionOptions: ParsableArguments {
    @Option(name: .customLong("max-connections-per-user"), help: "Connections one user may hold at once (default 256).")
    var maxConnectionsPerUser = ConnectionBudget.Limits.standard.perUser

    @Option(
        name: .customLong("max-connections"),
        help: "Connections the daemon serves at once (default 4096; lowered to what the descriptor limit allows)."
    )
    var maxConnections = ConnectionBudget.Limits.standard.total

    @Option(
        name: .customLong("hello-timeout"),
        help: "Seconds a new connection may take to say hello before it is closed."
    )
    var helloTimeout: Double = 10

    @Option(
        name: .customLong("handoff"),
        help:
            "Who may hand over a terminal for a prompt or a pipe of secrets on the handoff socket: always (everyone, the default), if-kernel-refuses (everyone where the kernel refuses descriptors sent unasked, Linux 6.16; root only elsewhere), root, or never. Over the file's handoff."
    )
    var handoff: HandoffSocketSetting?
}

extension HandoffSocketSetting: ExpressibleByArgument {}
