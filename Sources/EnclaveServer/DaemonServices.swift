import ServiceLifecycle
import Synchronization

/// The handoff socket's server, handed by the daemon's socket service (which binds it once its own
/// socket is bound) to the handoff service (which stops it).
final class HandoffSlot: Sendable {
    private let server = Mutex<HandoffServer?>(nil)

    func hold(_ new: HandoffServer?) { server.withLock { $0 = new } }

    func take() -> HandoffServer? {
        server.withLock { s in
            defer { s = nil }
            return s
        }
    }
}

/// The handoff socket (`HandoffServer`, on a thread of its own) as a service of the daemon's
/// group: it serves from before the daemon's socket is ready until the daemon's socket has
/// stopped, then its loop ends and its socket goes.
struct HandoffService: Service {
    let slot: HandoffSlot

    func run() async {
        // Cancelled (another service failed) ends it the same way.
        try? await gracefulShutdown()
        slot.take()?.stop()
    }
}

/// The audit log's group commit as a service: entries still waiting for their commit are written
/// once the daemon's socket has stopped — so nothing adds another — before the process exits.
struct AuditLogService: Service {
    let log: AuditLog

    func run() async {
        try? await gracefulShutdown()
        log.flush()
    }
}
